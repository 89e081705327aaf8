"""Does a copied key or value decode against the schema its id names? The check behind the decode report.

A migration of a tenant with registered schemas is only done when its consumers can read the destination:
every wire-format key and value (`core.schemas.schema_wire`) must carry an id the destination registry knows, and
the bytes after the header must decode with the schema stored under that id. This module decides that for
one payload at a time, with no I/O: the caller hands in a `lookup` from schema id to `RegisteredSchema`
(the registry client fetches it, references resolved).

Outcomes, one per payload:
    plain    no wire-format header (no magic byte, or shorter than 5 bytes): not the registry's business
    decoded  the header's id is known and the payload decodes with its schema, to the last byte
    failed   the id is unknown, the schema cannot be parsed, or the payload does not decode (a reason says which)

How each schema type is checked, and how far:
    AVRO      fastavro reads the payload with the registered schema (named types of referenced schemas
              included) and must end exactly at the payload's end: a truncated or padded record fails.
    JSON      the payload must be JSON, and valid against the registered JSON Schema (jsonschema's
              validator of the schema's draft; referenced schemas are resolvable by their reference name).
    PROTOBUF  the message-index array must parse and its first index must name a top-level message of the
              .proto text (or of the serialized descriptor confluent-kafka's serializer registers); the
              rest must walk as Protobuf wire format (tags, wire types, lengths within the payload) to its
              last byte. Field types are not checked: that needs compiled descriptors, which registries do
              not hand out alike (`GET /schemas/ids/{id}?format=serialized`: Confluent answers base64,
              Apicurio 3.3.3 the raw descriptor bytes in a JSON string, measured) and Python has no .proto
              compiler at run time. The report says "message index and wire structure" for it.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import fastavro
import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from kafka_ferry.core.common.failures import Permanent, Retryable
from kafka_ferry.core.schemas.protobuf_schema import serialized_descriptor
from kafka_ferry.core.schemas.schema_wire import HEADER_SIZE, schema_id_of

Outcome = Literal["plain", "decoded", "failed"]
CHECKS = {"AVRO": "decoded with fastavro", "JSON": "validated with jsonschema",
          "PROTOBUF": "message index and wire structure"}


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as a registry stores it under an id, with the schemas its references name, by reference name."""

    schema_type: str  # AVRO | PROTOBUF | JSON
    schema: str
    references: Mapping[str, RegisteredSchema] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    schema_id: int | None = None
    schema_type: str | None = None
    reason: str = ""


PLAIN = Verdict("plain")


class _Unusable(Permanent):
    """A schema that cannot be used to decode anything (the reason is the message)."""


class DecodeFailure(Retryable, ValueError):
    """A payload that does not decode, said by positions, schema paths, keywords and types only.

    Why a class of its own: a failure reason reaches the run page, XCom and logs for everyone who can read the
    DAG, so it must never quote the record (decoders' own messages do: "'123-45-6789' is not of type
    'integer'"). Only this class's messages are shown; any other decoder error is named by its type alone.
    """


# JSON Schema's names for the types of a decoded JSON value (the type is shown, never the value).
_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
               type(None): "null"}


def _safe_reason(exc: Exception) -> str:
    """What a decoder's exception may say on a page: its own positions, or its type only."""
    if isinstance(exc, DecodeFailure):
        return str(exc)[:300]
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON: {exc.msg} at byte {exc.pos}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not {exc.encoding} text at byte {exc.start}"
    return f"{type(exc).__name__} (its message is not shown: it may quote the record)"


class PayloadChecker:
    """Checks payloads against the schemas a `lookup` returns; parses each id's schema once.

    `lookup(schema_id)` returns the registered schema, or None when the registry has no such id. A lookup
    that raises (registry unreachable) propagates: that is not a verdict on the record.
    """

    def __init__(self, lookup: Callable[[int], RegisteredSchema | None]):
        self._lookup = lookup
        self._parsed: dict[int, tuple[str, Callable[[bytes], None]] | str] = {}
        self._decoded: dict[int, Verdict] = {}  # one shared verdict per id: check() is on a per-record path

    def check(self, payload: bytes | None) -> Verdict:
        schema_id = schema_id_of(payload)
        if payload is None or schema_id is None:
            return PLAIN
        parsed = self._parsed.get(schema_id)
        if parsed is None:
            parsed = self._parsed[schema_id] = self._parse(schema_id)
        if isinstance(parsed, str):
            return Verdict("failed", schema_id, None, parsed)
        schema_type, decode = parsed
        try:
            decode(payload[HEADER_SIZE:])
        except Exception as exc:  # every decoder's way of saying "not this schema's bytes"
            return Verdict("failed", schema_id, schema_type, f"{schema_type} payload does not decode: "
                                                             f"{_safe_reason(exc)}")
        verdict = self._decoded.get(schema_id)
        if verdict is None:
            verdict = self._decoded[schema_id] = Verdict("decoded", schema_id, schema_type)
        return verdict

    def _parse(self, schema_id: int) -> tuple[str, Callable[[bytes], None]] | str:
        registered = self._lookup(schema_id)
        if registered is None:
            return f"schema id {schema_id} is not in the registry"
        kind = (registered.schema_type or "AVRO").upper()
        builder = {"AVRO": _avro_decoder, "JSON": _json_decoder, "PROTOBUF": _protobuf_decoder}.get(kind)
        if builder is None:
            return f"schema id {schema_id} has schema type {kind!r}, which no check knows"
        try:
            return kind, builder(registered)
        except _Unusable as exc:
            return f"schema id {schema_id} ({kind}) cannot be used: {exc}"


# --- Avro ------------------------------------------------------------------------------------------------
def _avro_decoder(registered: RegisteredSchema) -> Callable[[bytes], None]:
    named: dict[str, Any] = {}
    try:
        _parse_avro_references(registered, named)
        schema = fastavro.parse_schema(json.loads(registered.schema), named_schemas=named)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException,
            fastavro.schema.UnknownType) as exc:
        raise _Unusable(f"{type(exc).__name__}: {exc}") from None

    def decode(body: bytes) -> None:
        stream = io.BytesIO(body)
        fastavro.schemaless_reader(stream, schema, None)
        left = len(body) - stream.tell()
        if left:
            raise DecodeFailure(f"{left} byte(s) left after the record")

    return decode


def _parse_avro_references(registered: RegisteredSchema, named: dict[str, Any]) -> None:
    """Referenced schemas first (depth first), so their named types exist when the referencing one parses."""
    for ref in registered.references.values():
        _parse_avro_references(ref, named)
        fastavro.parse_schema(json.loads(ref.schema), named_schemas=named)


# --- JSON Schema -----------------------------------------------------------------------------------------
def _json_decoder(registered: RegisteredSchema) -> Callable[[bytes], None]:
    try:
        schema = json.loads(registered.schema)
        resources = [(name, Resource.from_contents(json.loads(ref.schema), default_specification=DRAFT202012))
                     for name, ref in _all_references(registered)]
        validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator_cls.check_schema(schema)
        validator = validator_cls(schema, registry=Registry().with_resources(resources))
    except (ValueError, jsonschema.SchemaError) as exc:
        raise _Unusable(f"{type(exc).__name__}: {str(exc)[:200]}") from None

    def decode(body: bytes) -> None:
        error = jsonschema.exceptions.best_match(validator.iter_errors(json.loads(body)))
        if error is not None:
            raise DecodeFailure(_json_schema_failure(error))

    return decode


def _json_schema_failure(error: jsonschema.ValidationError) -> str:
    """Where and why, never what: the field's path, the failed keyword, its schema path and the value's type.

    jsonschema's own message quotes the value; `required` is the one keyword whose message names only schema
    text (the missing property), so it is kept.
    """
    path = "/".join(str(p) for p in error.absolute_path) or "(root)"
    schema_path = "/".join(str(p) for p in error.absolute_schema_path)
    kind = _JSON_TYPES.get(type(error.instance), type(error.instance).__name__)
    if error.validator == "required":
        return f"at {path}: {error.message[:160]} (schema path {schema_path})"
    return f"at {path}: fails '{error.validator}' (schema path {schema_path}); the field is a {kind}"


def _all_references(registered: RegisteredSchema) -> Iterator[tuple[str, RegisteredSchema]]:
    for name, ref in registered.references.items():
        yield name, ref
        yield from _all_references(ref)


# --- Protobuf --------------------------------------------------------------------------------------------
WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_SGROUP, WIRE_EGROUP, WIRE_I32 = 0, 1, 2, 3, 4, 5
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')
_TOKENS = re.compile(r"[A-Za-z_][\w.]*|[{}]")


def top_level_messages(proto: str) -> int:
    """How many messages the .proto text declares at file level (the first message index counts those)."""
    tokens = _TOKENS.findall(_STRINGS.sub('""', _COMMENTS.sub(" ", proto)))
    count = depth = 0
    for i, token in enumerate(tokens):
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
        elif depth == 0 and token == "message" and tokens[i + 2:i + 3] == ["{"]:
            count += 1
    return count


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of the base-128 varint at `pos`; at most 10 bytes."""
    value = shift = 0
    for i in range(10):
        if pos + i >= len(data):
            raise DecodeFailure(f"varint at byte {pos} runs past the end")
        byte = data[pos + i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + i + 1
        shift += 7
    raise DecodeFailure(f"varint at byte {pos} is longer than 10 bytes")


def zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def message_indexes(body: bytes) -> tuple[list[int], int]:
    """The Confluent message-index array at the start of a Protobuf body, and where the message starts.

    A count (zig-zag varint) then that many indexes; a count of 0 is the short form of [0].
    """
    count, pos = read_varint(body, 0)
    count = zigzag(count)
    if count < 0 or count > 100:
        raise DecodeFailure(f"message-index count {count} is not plausible")
    if count == 0:
        return [0], pos
    indexes = []
    for _ in range(count):
        raw, pos = read_varint(body, pos)
        indexes.append(zigzag(raw))
    if any(i < 0 for i in indexes):
        raise DecodeFailure(f"negative message index in {indexes}")
    return indexes, pos


def walk_wire_format(data: bytes, pos: int = 0) -> None:
    """Walk Protobuf fields from `pos` to the end; raise ValueError at the first thing no encoder writes."""
    groups: list[int] = []
    while pos < len(data):
        tag, at = read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise DecodeFailure(f"field number 0 at byte {pos}")
        if wire == WIRE_VARINT:
            _, pos = read_varint(data, at)
        elif wire in (WIRE_I64, WIRE_I32):
            pos = at + (8 if wire == WIRE_I64 else 4)
        elif wire == WIRE_LEN:
            length, at = read_varint(data, at)
            pos = at + length
        elif wire == WIRE_SGROUP:
            groups.append(number)
            pos = at
        elif wire == WIRE_EGROUP:
            if not groups or groups.pop() != number:
                raise DecodeFailure(f"end of group {number} at byte {pos} without its start")
            pos = at
        else:
            raise DecodeFailure(f"wire type {wire} at byte {pos} does not exist")
        if pos > len(data):
            raise DecodeFailure(f"field {number} at byte {at} runs past the end ({pos} > {len(data)})")
    if groups:
        raise DecodeFailure(f"group {groups[-1]} is not closed")


def _protobuf_decoder(registered: RegisteredSchema) -> Callable[[bytes], None]:
    descriptor = serialized_descriptor(registered.schema)  # as confluent-kafka's serializer registers it
    messages = len(descriptor.message_type) if descriptor is not None else top_level_messages(registered.schema)
    if messages == 0:
        raise _Unusable("the schema declares no message")

    def decode(body: bytes) -> None:
        indexes, start = message_indexes(body)
        if indexes[0] >= messages:
            raise DecodeFailure(f"message index {indexes} names message {indexes[0]}, the schema has {messages}")
        walk_wire_format(body, start)

    return decode
