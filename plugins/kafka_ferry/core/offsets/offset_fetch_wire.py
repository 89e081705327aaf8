"""Kafka protocol requests the client lacks: many groups' committed offsets in one OffsetFetch, and what reaching a
broker for it takes (ApiVersions, FindCoordinator, SASL with PLAIN or SCRAM).

Why: librdkafka's ``list_consumer_group_offsets`` takes one group per OffsetFetch request, so reading 200 groups is 200
requests. Kafka answers many groups in one OffsetFetch since v8 (KIP-709, Kafka 3.0) and finds many groups'
coordinators in one FindCoordinator since v4 (KIP-699). Only those calls are wrapped (``kafka.offset_fetch`` does the
I/O); everything else stays with the client.

Each message is declared once, field by field in the order of Kafka's JSON message specs
(``clients/src/main/resources/common/message/*.json``): request header v1 (non-flexible) / v2 (flexible: tagged
fields), response header v0 / v1, compact strings and arrays (length + 1 as an unsigned varint, 0 = null) in flexible
versions. Each request and response body is a :class:`~kafka_ferry.core.common.kafka_wire.Struct` of the shared
primitives (``core.common.kafka_wire``), encoded and decoded only through it. Unknown tagged fields are skipped, as
Kafka's readers do. Decoding is strict: a truncated body, a negative length where none may be, or trailing bytes
raise :class:`KafkaProtocolError` naming the message, field (its path through arrays) and byte.

Pure: no sockets, no client; the SCRAM client messages (RFC 5802, RFC 7677) are here too, computed with hashlib/hmac.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.common.kafka_wire import (
    BOOLEAN,
    BYTES,
    COMPACT_NULLABLE_BYTES,
    COMPACT_NULLABLE_STRING,
    COMPACT_STRING,
    INT8,
    INT16,
    INT32,
    INT64,
    NULLABLE_STRING,
    STRING,
    UVARINT,
    Array,
    Field,
    Struct,
    WireFormatError,
    WireType,
)

API_OFFSET_FETCH = 9
API_FIND_COORDINATOR = 10
API_SASL_HANDSHAKE = 17
API_API_VERSIONS = 18
API_SASL_AUTHENTICATE = 36

OFFSET_FETCH_VERSION = 8  # the first version with a groups array (KIP-709)
FIND_COORDINATOR_VERSION = 4  # the first version with coordinator keys (KIP-699)
COORDINATOR_KEY_GROUP = 0

MAX_FRAME_BYTES = 100 * 1024 * 1024  # a response larger than this is not an OffsetFetch answer kafka-ferry asked for

class KafkaProtocolError(WireFormatError):
    """A message cannot be encoded or a broker's answer cannot be decoded; names the message, field and byte.

    ``kafka.offset_fetch`` catches this one class to fall back to the client's per-group calls, so every way in
    here (the request builders, :class:`Reader`, ``frame_size``) turns the shared primitives' error into it."""


@contextmanager
def _protocol_errors() -> Iterator[None]:
    try:
        yield
    except KafkaProtocolError:
        raise
    except WireFormatError as exc:
        raise KafkaProtocolError(str(exc)) from exc


@_protocol_errors()
def _uvarint(value: int) -> bytes:
    return UVARINT.encode("unsigned varint", value)


# --- the messages, field by field as Kafka's JSON specs declare them ------------------------------------------------
_HEADER_FIELDS = (Field("api_key", INT16), Field("api_version", INT16), Field("correlation_id", INT32),
                  Field("client_id", NULLABLE_STRING))  # a non-compact string even in the flexible header v2
REQUEST_HEADER_V1 = Struct("RequestHeader v1", _HEADER_FIELDS)
REQUEST_HEADER_V2 = Struct("RequestHeader v2", _HEADER_FIELDS, flexible=True)
RESPONSE_HEADER_V0 = Struct("ResponseHeader v0", (Field("correlation_id", INT32),))
RESPONSE_HEADER_V1 = Struct("ResponseHeader v1", (Field("correlation_id", INT32),), flexible=True)
TAGS_ONLY = Struct("tagged fields", (), flexible=True)

API_VERSIONS_REQUEST_V0 = Struct("ApiVersionsRequest v0", ())
API_VERSIONS_RESPONSE_V0 = Struct("ApiVersionsResponse v0", (
    Field("error_code", INT16),
    Field("api_keys", Array(Struct("ApiVersion v0", (
        Field("api_key", INT16), Field("min_version", INT16), Field("max_version", INT16))))),
))

FIND_COORDINATOR_REQUEST_V4 = Struct("FindCoordinatorRequest v4", (
    Field("key_type", INT8), Field("coordinator_keys", Array(COMPACT_STRING, compact=True))), flexible=True)
FIND_COORDINATOR_RESPONSE_V4 = Struct("FindCoordinatorResponse v4", (
    Field("throttle_time_ms", INT32),
    Field("coordinators", Array(Struct("Coordinator v4", (
        Field("key", COMPACT_STRING), Field("node_id", INT32), Field("host", COMPACT_STRING), Field("port", INT32),
        Field("error_code", INT16), Field("error_message", COMPACT_NULLABLE_STRING)), flexible=True), compact=True)),
), flexible=True)

OFFSET_FETCH_REQUEST_V8 = Struct("OffsetFetchRequest v8", (
    Field("groups", Array(Struct("OffsetFetchRequestGroup v8", (
        Field("group_id", COMPACT_STRING),
        Field("topics", Array(Struct("OffsetFetchRequestTopics v8", (  # null: every partition of the group
            Field("name", COMPACT_STRING), Field("partition_indexes", Array(INT32, compact=True))), flexible=True),
            compact=True, nullable=True))), flexible=True), compact=True)),
    Field("require_stable", BOOLEAN),
), flexible=True)
OFFSET_FETCH_RESPONSE_V8 = Struct("OffsetFetchResponse v8", (
    Field("throttle_time_ms", INT32),
    Field("groups", Array(Struct("OffsetFetchResponseGroup v8", (
        Field("group_id", COMPACT_STRING),
        Field("topics", Array(Struct("OffsetFetchResponseTopics v8", (
            Field("name", COMPACT_STRING),
            Field("partitions", Array(Struct("OffsetFetchResponsePartitions v8", (
                Field("partition_index", INT32), Field("committed_offset", INT64),
                Field("committed_leader_epoch", INT32),
                # a COMPACT_NULLABLE_STRING in the spec, read raw: Kafka Streams commits binary metadata
                Field("metadata", COMPACT_NULLABLE_BYTES),
                Field("error_code", INT16)), flexible=True), compact=True))), flexible=True), compact=True)),
        Field("error_code", INT16)), flexible=True), compact=True)),
), flexible=True)

SASL_HANDSHAKE_REQUEST_V1 = Struct("SaslHandshakeRequest v1", (Field("mechanism", STRING),))
SASL_HANDSHAKE_RESPONSE_V1 = Struct("SaslHandshakeResponse v1", (
    Field("error_code", INT16), Field("mechanisms", Array(STRING))))
SASL_AUTHENTICATE_REQUEST_V1 = Struct("SaslAuthenticateRequest v1", (Field("auth_bytes", BYTES),))
SASL_AUTHENTICATE_RESPONSE_V1 = Struct("SaslAuthenticateResponse v1", (
    Field("error_code", INT16), Field("error_message", NULLABLE_STRING), Field("auth_bytes", BYTES),
    Field("session_lifetime_ms", INT64)))


# --- writing --------------------------------------------------------------------------------------------------------
@_protocol_errors()
def request_message(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: bytes, *,
                    flexible: bool) -> bytes:
    """A request as sent: INT32 size, then header v1 (or v2 when ``flexible``: an empty tagged-field section after
    the client id, which stays a non-compact NULLABLE_STRING in every header version), then the body."""
    header = REQUEST_HEADER_V2 if flexible else REQUEST_HEADER_V1
    message = header.encode(header.name, {"api_key": api_key, "api_version": api_version,
                                          "correlation_id": correlation_id, "client_id": client_id}) + body
    return INT32.encode("request size", len(message)) + message


@_protocol_errors()
def api_versions_v0() -> bytes:
    """ApiVersions v0 request body: no fields (answered with every API's version range)."""
    return API_VERSIONS_REQUEST_V0.encode("ApiVersions", {})


@_protocol_errors()
def find_coordinator_v4(group_ids: Sequence[str]) -> bytes:
    """FindCoordinator v4 request body: KeyType INT8 (0 = group), CoordinatorKeys COMPACT_ARRAY of COMPACT_STRING."""
    return FIND_COORDINATOR_REQUEST_V4.encode("FindCoordinator", {
        "key_type": COORDINATOR_KEY_GROUP, "coordinator_keys": list(group_ids)})


@_protocol_errors()
def offset_fetch_v8(group_ids: Sequence[str], *, require_stable: bool = False) -> bytes:
    """OffsetFetch v8 request body: Groups COMPACT_ARRAY of (GroupId COMPACT_STRING, Topics null = all partitions,
    tags), RequireStable BOOLEAN, tags."""
    return OFFSET_FETCH_REQUEST_V8.encode("OffsetFetch", {
        "groups": [{"group_id": g, "topics": None} for g in group_ids], "require_stable": require_stable})


@_protocol_errors()
def sasl_handshake_v1(mechanism: str) -> bytes:
    """SaslHandshake v1 request body (non-flexible): Mechanism STRING."""
    return SASL_HANDSHAKE_REQUEST_V1.encode("SaslHandshake", {"mechanism": mechanism})


@_protocol_errors()
def sasl_authenticate_v1(auth_bytes: bytes) -> bytes:
    """SaslAuthenticate v1 request body (non-flexible): AuthBytes BYTES (INT32 length)."""
    return SASL_AUTHENTICATE_REQUEST_V1.encode("SaslAuthenticate", {"auth_bytes": auth_bytes})


# --- reading --------------------------------------------------------------------------------------------------------
class Reader:
    """A cursor over one response body, read front to back through the declared types; each error names
    ``message``, the field and the byte position."""

    def __init__(self, message: str, data: bytes) -> None:
        self.message, self.data, self.pos = message, data, 0

    @_protocol_errors()
    def read(self, type_: WireType, field: str) -> Any:
        value, self.pos = type_.decode(f"{self.message} field {field!r}", self.data, self.pos)
        return value

    @_protocol_errors()
    def struct(self, struct: Struct) -> dict[str, Any]:
        """The fields of ``struct`` (named after ``message`` in errors), from the cursor on."""
        value, self.pos = struct.decode(self.message, self.data, self.pos)
        return value

    def int8(self, field: str) -> int:
        return int(self.read(INT8, field))

    def uvarint(self, field: str) -> int:
        return int(self.read(UVARINT, field))

    def compact_string(self, field: str) -> str:
        return str(self.read(COMPACT_STRING, field))

    def compact_array(self, field: str) -> int:
        """A non-nullable COMPACT_ARRAY's item count (the items follow)."""
        count = self.uvarint(field) - 1
        if count < 0:
            raise KafkaProtocolError(f"{self.message} field {field!r} is a null array; it may not be")
        return count

    @_protocol_errors()
    def tags(self, field: str) -> None:
        """Skip a tagged-field section: none of the fields read here is tagged, so every tag is an unknown one."""
        _, self.pos = TAGS_ONLY.decode(f"{self.message} {field}", self.data, self.pos)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise KafkaProtocolError(f"{self.message}: {len(self.data) - self.pos} unexpected byte(s) after the last "
                                     f"field, at byte {self.pos}")


def response_body(message: str, frame: bytes, correlation_id: int, *, flexible: bool) -> Reader:
    """The body of one response (``frame`` without its INT32 size): header v0 (CorrelationId) or v1 (then tags).
    A response to another request (a different correlation id) is an error: the connection is out of step."""
    reader = Reader(message, frame)
    got = reader.struct(RESPONSE_HEADER_V1 if flexible else RESPONSE_HEADER_V0)["correlation_id"]
    if got != correlation_id:
        raise KafkaProtocolError(f"{message}: answer has correlation id {got}, the request had {correlation_id}")
    return reader


@_protocol_errors()
def frame_size(message: str, prefix: bytes) -> int:
    """A response's INT32 size prefix, checked: not negative, not beyond ``MAX_FRAME_BYTES``."""
    size, used = INT32.decode(f"{message} size prefix", prefix, 0)
    if used != len(prefix):
        raise KafkaProtocolError(f"{message}: size prefix is {len(prefix)} bytes, not 4")
    if not 4 <= size <= MAX_FRAME_BYTES:
        raise KafkaProtocolError(f"{message}: response size {size} out of range [4, {MAX_FRAME_BYTES}]")
    return size


@dataclass(frozen=True)
class ApiVersions:
    error_code: int
    versions: dict[int, tuple[int, int]]  # api key -> (min, max)

    def max_version(self, api_key: int) -> int:
        """The broker's highest version of ``api_key``; -1 when it does not offer the API."""
        return self.versions.get(api_key, (-1, -1))[1]


def read_api_versions_v0(reader: Reader) -> ApiVersions:
    """ApiVersions v0 response: ErrorCode INT16, ApiKeys ARRAY of (ApiKey, MinVersion, MaxVersion INT16)."""
    v = reader.struct(API_VERSIONS_RESPONSE_V0)
    reader.end()
    return ApiVersions(v["error_code"], {k["api_key"]: (k["min_version"], k["max_version"]) for k in v["api_keys"]})


@dataclass(frozen=True)
class Coordinator:
    key: str
    node_id: int
    host: str
    port: int
    error_code: int
    error_message: str | None


def read_find_coordinator_v4(reader: Reader) -> list[Coordinator]:
    """FindCoordinator v4 response: ThrottleTimeMs INT32, Coordinators COMPACT_ARRAY of (Key COMPACT_STRING, NodeId
    INT32, Host COMPACT_STRING, Port INT32, ErrorCode INT16, ErrorMessage COMPACT_NULLABLE_STRING, tags), tags."""
    v = reader.struct(FIND_COORDINATOR_RESPONSE_V4)
    reader.end()
    return [Coordinator(c["key"], c["node_id"], c["host"], c["port"], c["error_code"], c["error_message"])
            for c in v["coordinators"]]


@dataclass(frozen=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: bytes | None  # raw: Kafka Streams commits binary metadata
    error_code: int


@dataclass(frozen=True)
class GroupOffsets:
    group_id: str
    error_code: int
    partitions: tuple[CommittedOffset, ...]


def read_offset_fetch_v8(reader: Reader) -> list[GroupOffsets]:
    """OffsetFetch v8 response: ThrottleTimeMs INT32, Groups COMPACT_ARRAY of (GroupId COMPACT_STRING, Topics
    COMPACT_ARRAY of (Name COMPACT_STRING, Partitions COMPACT_ARRAY of (PartitionIndex INT32, CommittedOffset INT64,
    CommittedLeaderEpoch INT32, Metadata COMPACT_NULLABLE_STRING, ErrorCode INT16, tags), tags), ErrorCode INT16,
    tags), tags."""
    v = reader.struct(OFFSET_FETCH_RESPONSE_V8)
    reader.end()
    return [GroupOffsets(g["group_id"], g["error_code"], tuple(
        CommittedOffset(topic=t["name"], partition=p["partition_index"], offset=p["committed_offset"],
                        leader_epoch=p["committed_leader_epoch"], metadata=p["metadata"], error_code=p["error_code"])
        for t in g["topics"] for p in t["partitions"])) for g in v["groups"]]


@dataclass(frozen=True)
class SaslHandshake:
    error_code: int
    mechanisms: tuple[str, ...]


def read_sasl_handshake_v1(reader: Reader) -> SaslHandshake:
    """SaslHandshake v1 response: ErrorCode INT16, Mechanisms ARRAY of STRING."""
    v = reader.struct(SASL_HANDSHAKE_RESPONSE_V1)
    reader.end()
    return SaslHandshake(v["error_code"], tuple(v["mechanisms"]))


@dataclass(frozen=True)
class SaslAuthenticate:
    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int


def read_sasl_authenticate_v1(reader: Reader) -> SaslAuthenticate:
    """SaslAuthenticate v1 response: ErrorCode INT16, ErrorMessage NULLABLE_STRING, AuthBytes BYTES,
    SessionLifetimeMs INT64."""
    v = reader.struct(SASL_AUTHENTICATE_RESPONSE_V1)
    reader.end()
    return SaslAuthenticate(v["error_code"], v["error_message"], v["auth_bytes"], v["session_lifetime_ms"])


def chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


# --- SASL client messages -------------------------------------------------------------------------------------------
def plain_message(username: str, password: str) -> bytes:
    """SASL PLAIN (RFC 4616): authzid (empty) NUL authcid NUL password."""
    return b"\0" + username.encode("utf-8") + b"\0" + password.encode("utf-8")


SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class ScramError(Retryable, ValueError):
    """The SCRAM exchange went wrong: the server's message is malformed, or its signature does not verify."""


def _scram_attributes(message: bytes) -> dict[str, str]:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScramError(f"SCRAM server message is not UTF-8: {exc}") from exc
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"SCRAM server message has a malformed attribute {part[:40]!r}")
        out[key] = value
    return out


class ScramClient:
    """The client's side of SCRAM-SHA-256/512 (RFC 5802, RFC 7677): no channel binding (gs2 header ``n,,``), as
    Kafka's SCRAM. ``nonce`` is for tests with the RFCs' vectors; otherwise a random one."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        if mechanism not in SCRAM_HASHES:
            raise ScramError(f"SCRAM mechanism {mechanism!r} is not one of {sorted(SCRAM_HASHES)}")
        self.hash = SCRAM_HASHES[mechanism]
        self.password = password.encode("utf-8")
        self.nonce = nonce or secrets.token_urlsafe(24)
        name = username.replace("=", "=3D").replace(",", "=2C")
        self.first_bare = f"n={name},r={self.nonce}"
        self._server_signature: bytes | None = None

    def first_message(self) -> bytes:
        return ("n,," + self.first_bare).encode("utf-8")

    def final_message(self, server_first: bytes) -> bytes:
        attrs = _scram_attributes(server_first)
        if "e" in attrs:
            raise ScramError(f"SCRAM server refused: {attrs['e']}")
        try:
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"], validate=True), int(attrs["i"])
        except (KeyError, ValueError) as exc:
            raise ScramError(f"SCRAM server-first message lacks or garbles r, s or i ({exc})") from exc
        if not nonce.startswith(self.nonce) or iterations < 1:
            raise ScramError("SCRAM server-first message does not extend the client's nonce, or has no iterations")
        salted = hashlib.pbkdf2_hmac(self.hash, self.password, salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self.first_bare},{server_first.decode('utf-8')},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self._server_signature = hmac.new(server_key, auth_message, self.hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """Raises unless the server proved it knows the password's keys (its signature matches)."""
        attrs = _scram_attributes(server_final)
        if "e" in attrs:
            raise ScramError(f"SCRAM server refused: {attrs['e']}")
        if self._server_signature is None:
            raise ScramError("SCRAM server-final message before the client-final one")
        try:
            signature = base64.b64decode(attrs["v"], validate=True)
        except (KeyError, ValueError) as exc:
            raise ScramError(f"SCRAM server-final message lacks or garbles v ({exc})") from exc
        if not hmac.compare_digest(signature, self._server_signature):
            raise ScramError("SCRAM server signature does not verify: not the server the password belongs to")
