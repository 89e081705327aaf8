"""The decode check's verdicts on single payloads (core.schemas.schema_decode): every outcome, every schema type."""

from __future__ import annotations

import io
import json
import struct

import fastavro
import pytest
from fastavro.types import NamedSchemas
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.schemas.schema_decode import (
    PayloadChecker,
    RegisteredSchema,
    message_indexes,
    read_varint,
    top_level_messages,
    walk_wire_format,
)

ADDRESS = {"type": "record", "name": "Address", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "ship_to", "type": "shop.Address"}]}
EVENT = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
         "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}}, "required": ["kind"]}
PROTO = """syntax = "proto3";
package shop;
// message Commented { }  is not a message
message Payment { string id = 1; int64 cents = 2; message Inner { int32 x = 1; } }
enum Currency { EUR = 0; }
message Refund { string payment_id = 1; string note = 2; }
"""

REGISTRY = {
    7: RegisteredSchema("AVRO", json.dumps(ORDER), {"shop.Address": RegisteredSchema("AVRO", json.dumps(ADDRESS))}),
    8: RegisteredSchema("JSON", json.dumps(EVENT)),
    9: RegisteredSchema("PROTOBUF", PROTO),
    10: RegisteredSchema("AVRO", '{"type": "record", "name": "Broken", "fields": [{"name": "x", "type": "nope"}]}'),
}


def wire(schema_id: int, body: bytes) -> bytes:
    return struct.pack(">bI", 0, schema_id) + body


def avro_order(order_id: int = 42, city: str = "Lyon") -> bytes:
    named: NamedSchemas = {}
    fastavro.parse_schema(ADDRESS, named_schemas=named)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER, named_schemas=named),
                               {"id": order_id, "ship_to": {"city": city}})
    return out.getvalue()


def protobuf_payment() -> bytes:
    # field 1 (string "p-1"), field 2 (varint 1250)
    return bytes([0x0A, 3]) + b"p-1" + bytes([0x10]) + bytes([0xE2, 0x09])


class CountingChecker(PayloadChecker):
    """The checker, with the schema ids its lookup was asked for."""

    looked_up: list[int]


@pytest.fixture
def checker():
    looked_up: list[int] = []

    def lookup(schema_id):
        looked_up.append(schema_id)
        return REGISTRY.get(schema_id)

    c = CountingChecker(lookup)
    c.looked_up = looked_up
    return c


def test_payloads_without_the_header_are_plain(checker):
    for payload in (None, b"", b"\x00\x00\x00\x07", b"plain text", json.dumps({"a": 1}).encode()):
        assert checker.check(payload).outcome == "plain"
    assert checker.looked_up == []


def test_avro_with_a_referenced_named_type_decodes(checker):
    verdict = checker.check(wire(7, avro_order()))
    assert (verdict.outcome, verdict.schema_id, verdict.schema_type) == ("decoded", 7, "AVRO")


def test_avro_truncated_or_padded_fails_and_says_why(checker):
    body = avro_order(city="Marseille")
    short = checker.check(wire(7, body[:-3]))
    assert short.outcome == "failed" and "AVRO payload does not decode" in short.reason
    padded = checker.check(wire(7, body + b"\x02"))
    assert padded.outcome == "failed" and "1 byte(s) left after the record" in padded.reason


def test_an_unknown_id_fails_naming_it_and_is_looked_up_once(checker):
    first, second = checker.check(wire(99, b"\x02")), checker.check(wire(99, b"\x04"))
    assert first.outcome == second.outcome == "failed"
    assert first.reason == "schema id 99 is not in the registry"
    assert checker.looked_up == [99]


def test_a_schema_that_does_not_parse_fails_every_record_naming_the_id(checker):
    verdict = checker.check(wire(10, b"\x02"))
    assert verdict.outcome == "failed" and verdict.reason.startswith("schema id 10 (AVRO) cannot be used")


def test_json_is_validated_against_its_schema(checker):
    assert checker.check(wire(8, json.dumps({"kind": "click", "n": 3}).encode())).outcome == "decoded"
    missing = checker.check(wire(8, json.dumps({"n": 3}).encode()))
    assert missing.outcome == "failed" and "'kind' is a required property" in missing.reason
    wrong_type = checker.check(wire(8, json.dumps({"kind": "x", "n": "three"}).encode()))
    assert wrong_type.outcome == "failed" and "at n:" in wrong_type.reason
    assert checker.check(wire(8, b"{not json")).outcome == "failed"


def test_json_references_resolve_by_their_name():
    money = {"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}
    main = {"type": "object", "properties": {"price": {"$ref": "money.json"}}}
    checker = PayloadChecker({1: RegisteredSchema("JSON", json.dumps(main),
                                                  {"money.json": RegisteredSchema("JSON", json.dumps(money))})}.get)
    assert checker.check(wire(1, b'{"price": {"cents": 5}}')).outcome == "decoded"
    assert checker.check(wire(1, b'{"price": {"cents": "5"}}')).outcome == "failed"


def test_protobuf_counts_top_level_messages_only():
    assert top_level_messages(PROTO) == 2  # Payment, Refund (not Inner, not the commented one, not the enum)
    assert top_level_messages('syntax = "proto3"; message A { string s = 1 [default = "message X {"]; }') == 1


def test_protobuf_index_and_wire_structure(checker):
    assert checker.check(wire(9, b"\x00" + protobuf_payment())).outcome == "decoded"  # short form of [0]
    assert checker.check(wire(9, bytes([2, 2]) + bytes([0x0A, 0]))).outcome == "decoded"  # [1]: Refund
    beyond = checker.check(wire(9, bytes([2, 4]) + protobuf_payment()))  # [2]: there are 2 messages
    assert beyond.outcome == "failed" and "names message 2, the schema has 2" in beyond.reason
    cut = checker.check(wire(9, b"\x00" + protobuf_payment()[:-1]))
    assert cut.outcome == "failed" and "runs past the end" in cut.reason
    bad_wire = checker.check(wire(9, b"\x00" + bytes([0x0F])))  # field 1, wire type 7
    assert bad_wire.outcome == "failed" and "wire type 7" in bad_wire.reason


def test_message_indexes_long_form():
    # count 2 (zig-zag 4), indexes 1 (2) and 0 (0), then the message
    assert message_indexes(bytes([4, 2, 0, 0x08, 1])) == ([1, 0], 3)


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_varints_read_back(value):
    out, v = bytearray(), value
    while True:
        byte = v & 0x7F
        v >>= 7
        out.append(byte | (0x80 if v else 0))
        if not v:
            break
    assert read_varint(bytes(out) + b"\xff", 0) == (value, len(out))


@given(st.lists(st.tuples(st.integers(1, 2**29 - 1), st.sampled_from([0, 1, 2, 5]), st.binary(max_size=20)),
                max_size=8))
def test_any_well_formed_message_walks_to_its_end(fields):
    def varint(v):
        out = bytearray()
        while True:
            byte = v & 0x7F
            v >>= 7
            out.append(byte | (0x80 if v else 0))
            if not v:
                return bytes(out)

    data = b""
    for number, wire_type, blob in fields:
        data += varint(number << 3 | wire_type)
        data += {0: varint(len(blob)), 1: blob[:8].ljust(8, b"\0"), 2: varint(len(blob)) + blob,
                 5: blob[:4].ljust(4, b"\0")}[wire_type]
    walk_wire_format(data)
    if data:
        with pytest.raises(ValueError):
            walk_wire_format(data + b"\x0a\x05ab")  # a length that runs past the end
