"""The Confluent wire-format id rewrite: literal bytes, then properties over arbitrary payloads."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.schemas.schema_wire import SchemaIdRewriter, UnknownSchemaId, schema_id_of, with_schema_id

AVRO_ID_258 = bytes.fromhex("00 00000102 02 61")  # magic, id 258, Avro string "a"
# Protobuf: id 7, message indexes [1, 0] as zig-zag varints (count 2 -> 04, 1 -> 02, 0 -> 00), payload 08 96 01
PROTO_ID_7 = bytes.fromhex("00 00000007 04 02 00 08 96 01")


def test_schema_id_is_read_big_endian_after_the_magic_byte():
    assert schema_id_of(AVRO_ID_258) == 258
    assert schema_id_of(PROTO_ID_7) == 7
    assert schema_id_of(bytes.fromhex("00 ffffffff")) == 2**32 - 1


@pytest.mark.parametrize("payload", [None, b"", b"\x00\x00\x00\x01", b"\x01\x00\x00\x00\x01\x02", b'{"a": 1}'])
def test_payloads_without_the_wire_format_carry_no_id_and_pass_untouched(payload):
    assert schema_id_of(payload) is None
    assert SchemaIdRewriter({1: 2}).rewrite(payload) is payload


def test_rewrite_changes_exactly_the_four_id_bytes():
    assert SchemaIdRewriter({258: 5}).rewrite(AVRO_ID_258) == bytes.fromhex("00 00000005 02 61")
    assert with_schema_id(AVRO_ID_258, 0x01020304) == bytes.fromhex("00 01020304 02 61")


def test_protobuf_message_indexes_are_kept_as_they_are():
    assert SchemaIdRewriter({7: 100001}).rewrite(PROTO_ID_7) == bytes.fromhex("00 000186a1 04 02 00 08 96 01")


def test_unknown_id_fails_by_default_and_names_the_id():
    with pytest.raises(UnknownSchemaId) as info:
        SchemaIdRewriter({1: 2}).rewrite(AVRO_ID_258)
    assert info.value.schema_id == 258
    assert "258" in str(info.value)


def test_unknown_id_passes_through_when_the_policy_says_so():
    rewriter = SchemaIdRewriter({1: 2}, policy="pass-through")
    assert rewriter.rewrite(AVRO_ID_258) is AVRO_ID_258
    assert SchemaIdRewriter({1: 2}).normalise(AVRO_ID_258) is AVRO_ID_258


def test_a_bad_policy_is_refused():
    with pytest.raises(ValueError, match="unknown-id policy"):
        SchemaIdRewriter({}, policy="drop")  # type: ignore[arg-type]


ids = st.integers(min_value=0, max_value=2**32 - 1)


@given(source_id=ids, destination_id=ids, body=st.binary(max_size=64))
def test_rewrite_then_reverse_restores_the_source_bytes(source_id, destination_id, body):
    payload = with_schema_id(b"\x00\x00\x00\x00\x00", source_id) + body
    out = SchemaIdRewriter({source_id: destination_id}).rewrite(payload)
    assert out is not None
    assert schema_id_of(out) == destination_id
    assert out[5:] == body and len(out) == len(payload)
    assert SchemaIdRewriter({destination_id: source_id}).rewrite(out) == payload


@given(payload=st.binary(max_size=32), id_map=st.dictionaries(ids, ids, max_size=4))
def test_pass_through_never_changes_anything_but_mapped_ids(payload, id_map):
    out = SchemaIdRewriter(id_map, policy="pass-through").rewrite(payload)
    assert out is not None
    source_id = schema_id_of(payload)
    if source_id in id_map:
        assert schema_id_of(out) == id_map[source_id] and out[5:] == payload[5:]
    else:
        assert out == payload
