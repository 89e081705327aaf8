"""MM2 wire formats pinned by literal bytes, edge values and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.offsets.mm2_wire import (
    CHECKPOINT_VALUE_V0,
    OFFSET_SYNC_KEY,
    STRING_MAX_BYTES,
    Checkpoint,
    Heartbeat,
    OffsetSync,
    WireFormatError,
    checkpoints_topic,
    offset_syncs_topic,
)

INT64_EDGES = [0, -1, 1, 2**32, -(2**32), 2**63 - 1, -(2**63)]
INT32_EDGES = [0, -1, 1, 2**31 - 1, -(2**31)]

int64s = st.integers(-(2**63), 2**63 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
names = st.text(max_size=200)


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


class TestLiteralVectors:
    def test_offset_sync_key_from_mm2_reference(self):
        assert OffsetSync("orders", 3, 0, 0).key_bytes() == hexbytes("00 06 6f 72 64 65 72 73 00 00 00 03")

    def test_offset_sync_value_has_no_version(self):
        sync = OffsetSync("orders", 3, upstream_offset=258, downstream_offset=2**32)
        assert sync.value_bytes() == hexbytes("00 00 00 00 00 00 01 02  00 00 00 01 00 00 00 00")

    def test_checkpoint_key_and_value(self):
        cp = Checkpoint("g1", "t", 7, upstream_offset=5, downstream_offset=4, metadata="m")
        assert cp.key_bytes() == hexbytes("0002 6731  0001 74  00000007")
        assert cp.value_bytes() == hexbytes("0000  0000000000000005  0000000000000004  0001 6d")

    def test_checkpoint_empty_metadata(self):
        cp = Checkpoint("g", "t", 0, 0, 0)
        assert cp.value_bytes() == hexbytes("0000" + "00" * 16 + "0000")

    def test_heartbeat_key_and_value(self):
        hb = Heartbeat("A", "B", timestamp_ms=1_700_000_000_000)
        assert hb.key_bytes() == hexbytes("0001 41 0001 42")
        assert hb.value_bytes() == hexbytes("0000 0000018bcfe56800")

    def test_multibyte_utf8_length_counts_bytes_not_chars(self):
        sync = OffsetSync("é", 0, 0, 0)
        assert sync.key_bytes() == hexbytes("0002 c3a9 00000000")

    def test_negative_values_are_twos_complement(self):
        sync = OffsetSync("", -1, -1, -(2**63))
        assert sync.key_bytes() == hexbytes("0000 ffffffff")
        assert sync.value_bytes() == hexbytes("ffffffffffffffff 8000000000000000")


class TestRoundTrip:
    @pytest.mark.parametrize("value", INT64_EDGES)
    def test_int64_edges(self, value):
        sync = OffsetSync("t", 0, value, value)
        back = OffsetSync.from_record(sync.key_bytes(), sync.value_bytes())
        assert back == sync
        assert back.value_bytes() == sync.value_bytes()
        cp = Checkpoint("g", "t", 0, value, value, "")
        assert Checkpoint.from_record(cp.key_bytes(), cp.value_bytes()) == cp
        hb = Heartbeat("a", "b", value)
        assert Heartbeat.from_record(hb.key_bytes(), hb.value_bytes()) == hb

    @pytest.mark.parametrize("partition", INT32_EDGES)
    def test_int32_edges(self, partition):
        sync = OffsetSync("t", partition, 1, 2)
        assert OffsetSync.from_record(sync.key_bytes(), sync.value_bytes()).partition == partition

    def test_string_at_max_length(self):
        topic = "x" * STRING_MAX_BYTES
        sync = OffsetSync(topic, 0, 0, 0)
        assert len(sync.key_bytes()) == 2 + STRING_MAX_BYTES + 4
        assert OffsetSync.from_record(sync.key_bytes(), sync.value_bytes()).topic == topic

    @given(names, int32s, int64s, int64s)
    def test_offset_sync(self, topic, partition, up, down):
        sync = OffsetSync(topic, partition, up, down)
        key, value = sync.key_bytes(), sync.value_bytes()
        back = OffsetSync.from_record(key, value)
        assert back == sync
        assert (back.key_bytes(), back.value_bytes()) == (key, value)

    @given(names, names, int32s, int64s, int64s, names)
    def test_checkpoint(self, group, topic, partition, up, down, metadata):
        cp = Checkpoint(group, topic, partition, up, down, metadata)
        back = Checkpoint.from_record(cp.key_bytes(), cp.value_bytes())
        assert back == cp
        assert (back.key_bytes(), back.value_bytes()) == (cp.key_bytes(), cp.value_bytes())

    @given(names, names, int64s)
    def test_heartbeat(self, source, target, ts):
        hb = Heartbeat(source, target, ts)
        assert Heartbeat.from_record(hb.key_bytes(), hb.value_bytes()) == hb

    def test_accepts_bytearray_and_memoryview(self):
        sync = OffsetSync("t", 1, 2, 3)
        back = OffsetSync.from_record(bytearray(sync.key_bytes()), memoryview(sync.value_bytes()))
        assert back == sync


class TestRejects:
    def test_truncated_key(self):
        key = OffsetSync("orders", 3, 0, 0).key_bytes()
        for cut in range(len(key)):
            with pytest.raises(WireFormatError, match="truncated"):
                OFFSET_SYNC_KEY.decode(key[:cut])

    def test_truncated_string_names_field(self):
        with pytest.raises(WireFormatError, match=r"'topic'.*length 6.*only 3 left"):
            OFFSET_SYNC_KEY.decode(hexbytes("0006 6f7264"))

    @pytest.mark.parametrize(
        "record", [OffsetSync("t", 0, 1, 2), Checkpoint("g", "t", 0, 1, 2, "m"), Heartbeat("a", "b", 3)]
    )
    def test_trailing_and_truncated_values_and_keys(self, record):
        cls = type(record)
        key, value = record.key_bytes(), record.value_bytes()
        with pytest.raises(WireFormatError, match="1 trailing bytes"):
            cls.from_record(key, value + b"\x00")
        with pytest.raises(WireFormatError, match="trailing"):
            cls.from_record(key + b"\x00", value)
        with pytest.raises(WireFormatError, match="truncated"):
            cls.from_record(key, value[:-1])
        with pytest.raises(WireFormatError, match="truncated"):
            cls.from_record(key[:-1], value)

    def test_unknown_checkpoint_version(self):
        cp = Checkpoint("g", "t", 0, 1, 2, "")
        value = b"\x00\x01" + cp.value_bytes()[2:]
        with pytest.raises(WireFormatError, match="unknown version 1"):
            Checkpoint.from_record(cp.key_bytes(), value)

    def test_unknown_heartbeat_version(self):
        hb = Heartbeat("a", "b", 1)
        with pytest.raises(WireFormatError, match="unknown version -1"):
            Heartbeat.from_record(hb.key_bytes(), b"\xff\xff" + hb.value_bytes()[2:])

    def test_null_string_length(self):
        with pytest.raises(WireFormatError, match="null strings"):
            OFFSET_SYNC_KEY.decode(hexbytes("ffff 00000000"))

    def test_invalid_utf8(self):
        with pytest.raises(WireFormatError, match="UTF-8"):
            OFFSET_SYNC_KEY.decode(hexbytes("0001 ff 00000000"))

    def test_string_too_long(self):
        with pytest.raises(WireFormatError, match=r"'topic'.*32768 UTF-8 bytes, max 32767"):
            OffsetSync("x" * (STRING_MAX_BYTES + 1), 0, 0, 0)

    def test_multibyte_string_too_long(self):
        with pytest.raises(WireFormatError, match="32768 UTF-8 bytes"):
            OffsetSync("é" * 16384, 0, 0, 0)

    def test_unencodable_string(self):
        with pytest.raises(WireFormatError, match="UTF-8"):
            OffsetSync("\ud800", 0, 0, 0)

    @pytest.mark.parametrize(
        ("kwargs", "pattern"),
        [
            ({"partition": 2**31}, r"'partition' \(INT32\) value 2147483648 out of range"),
            ({"partition": -(2**31) - 1}, r"'partition' \(INT32\) value -2147483649"),
            ({"upstream_offset": 2**63}, r"'upstreamOffset' \(INT64\) value 9223372036854775808"),
            ({"downstream_offset": -(2**63) - 1}, r"'offset' \(INT64\) value"),
            ({"partition": True}, "must be an int"),
            ({"upstream_offset": 1.0}, "must be an int"),
            ({"topic": b"orders"}, "must be a str"),
        ],
    )
    def test_out_of_range_and_wrong_types(self, kwargs, pattern):
        fields = {"topic": "t", "partition": 0, "upstream_offset": 0, "downstream_offset": 0, **kwargs}
        with pytest.raises(WireFormatError, match=pattern):
            OffsetSync(**fields)

    def test_tombstone(self):
        with pytest.raises(WireFormatError, match="None"):
            OffsetSync.from_record(OffsetSync("t", 0, 0, 0).key_bytes(), None)

    def test_layout_requires_every_field(self):
        with pytest.raises(WireFormatError, match="missing field 'metadata'"):
            CHECKPOINT_VALUE_V0.encode({"upstreamOffset": 1, "offset": 2})
        with pytest.raises(WireFormatError, match="unknown fields"):
            CHECKPOINT_VALUE_V0.encode({"upstreamOffset": 1, "offset": 2, "metadata": "", "extra": 1})

    def test_wire_error_is_value_error(self):
        assert issubclass(WireFormatError, ValueError)


def test_topic_names():
    assert offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert checkpoints_topic("A") == "A.checkpoints.internal"
    with pytest.raises(ValueError):
        offset_syncs_topic("")
