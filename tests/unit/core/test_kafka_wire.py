"""The shared Kafka wire primitives (core.common.kafka_wire) pinned by literal bytes, nulls, round trips and the
errors that name the field and byte; and that the offset-fetch codecs built on them raise only KafkaProtocolError."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.common import kafka_wire as kw
from kafka_ferry.core.common.kafka_wire import INT8, Array, Field, Struct, WireFormatError
from kafka_ferry.core.offsets import offset_fetch_wire as wire


def hexbytes(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


@pytest.mark.parametrize(("type_", "value", "raw"), [
    (INT8, -1, "ff"),
    (kw.BOOLEAN, True, "01"),
    (kw.BOOLEAN, False, "00"),
    (kw.UNSIGNED_VARINT, 300, "ac02"),
    (kw.STRING, "ab", "0002 6162"),
    (kw.NULLABLE_STRING, None, "ffff"),
    (kw.COMPACT_STRING, "ab", "03 6162"),
    (kw.COMPACT_NULLABLE_STRING, None, "00"),
    (kw.BYTES, b"\x00\x01", "00000002 0001"),
    (kw.COMPACT_NULLABLE_BYTES, b"\xff", "02 ff"),
    (kw.COMPACT_NULLABLE_BYTES, None, "00"),
    (Array(INT8), [1, 2], "00000002 01 02"),
    (Array(INT8, nullable=True), None, "ffffffff"),
    (Array(INT8, compact=True), [1], "02 01"),
    (Array(INT8, compact=True, nullable=True), None, "00"),
])
def test_literal_bytes_both_ways(type_, value, raw):
    assert type_.encode("x", value) == hexbytes(raw)
    assert type_.decode("x", hexbytes(raw), 0) == (value, len(hexbytes(raw)))


@pytest.mark.parametrize(("type_", "value"), [
    (kw.STRING, None), (kw.COMPACT_STRING, None), (kw.BYTES, None), (Array(INT8), None), (kw.BOOLEAN, 1),
    (kw.BYTES, "text"),
])
def test_a_value_the_type_cannot_hold_is_refused(type_, value):
    with pytest.raises(WireFormatError, match="'f'"):
        type_.encode("M field 'f'", value)


def test_a_null_where_none_may_be_names_the_field_and_byte():
    with pytest.raises(WireFormatError, match=r"M field 'f' \(COMPACT_ARRAY\[INT8\]\) is a null array at byte 1"):
        Array(INT8, compact=True).decode("M field 'f'", b"\x00", 0)
    with pytest.raises(WireFormatError, match=r"'f' \(BYTES\) has length -1; null bytes are not allowed"):
        kw.BYTES.decode("M field 'f'", hexbytes("ffffffff"), 0)


def test_nested_errors_name_the_path_to_the_field():
    inner = Struct("Inner", (Field("n", INT8),), flexible=True)
    outer = Struct("Outer", (Field("items", Array(inner, compact=True)),))
    with pytest.raises(WireFormatError, match=r"M field 'items'\[1\] field 'n' \(INT8\) truncated: needs 1 bytes "
                                              r"at byte 3"):
        outer.decode("M", hexbytes("03 07 00"), 0)
    with pytest.raises(WireFormatError, match="M: missing field 'items'"):
        outer.encode("M", {})


@given(st.lists(st.text(max_size=50), max_size=20), st.booleans())
def test_the_offset_fetch_request_reads_back_through_its_struct(groups, stable):
    body = wire.offset_fetch_v8(groups, require_stable=stable)
    assert wire.OFFSET_FETCH_REQUEST_V8.decode("OffsetFetch", body, 0) == (
        {"groups": [{"group_id": g, "topics": None} for g in groups], "require_stable": stable}, len(body))


def test_offset_fetch_codecs_raise_their_own_error():
    """kafka.offset_fetch falls back on KafkaProtocolError: the shared primitives' errors arrive as it."""
    assert issubclass(wire.KafkaProtocolError, WireFormatError)
    with pytest.raises(wire.KafkaProtocolError, match="32768 UTF-8 bytes"):
        wire.find_coordinator_v4(["g" * 32768])
    with pytest.raises(wire.KafkaProtocolError, match=r"'api_key' \(INT16\) value 40000"):
        wire.request_message(40000, 0, 1, "kf", b"", flexible=False)
    with pytest.raises(wire.KafkaProtocolError, match="tag 5 after tag 5"):
        wire.response_body("X", hexbytes("00000001 02 05 00 05 00"), 1, flexible=True)
