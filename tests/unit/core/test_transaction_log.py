"""__transaction_state wire formats (core.units.transaction_log): literal bytes, round trips, strictness, the fold."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.offsets.mm2_wire import WireFormatError
from kafka_ferry.core.units.transaction_log import (
    UVARINT,
    TransactionState,
    decode_key,
    decode_record,
    read_transaction_log,
    transaction_key_bytes,
)


def hexbytes(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


int64s = st.integers(-(2**63), 2**63 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
topics = st.text(alphabet="abcxyz._-0123456789", min_size=1, max_size=30)
partitions = st.none() | st.lists(st.tuples(topics, st.lists(int32s, max_size=5).map(tuple)), max_size=5).map(tuple)


@st.composite
def states(draw):
    v = draw(st.sampled_from([0, 1]))
    tagged = {} if v == 0 else {"previous_producer_id": draw(int64s), "next_producer_id": draw(int64s),
                                "client_transaction_version": draw(st.integers(-(2**15), 2**15 - 1))}
    return TransactionState(draw(st.text(max_size=50)), v, draw(int64s), draw(st.integers(-(2**15), 2**15 - 1)),
                            draw(int32s), draw(st.integers(-128, 127)), draw(partitions), draw(int64s),
                            draw(int64s), **tagged)


class TestLiteralBytes:
    """Hand-assembled from the declared layouts (the captured ones are in test_transaction_log_captured.py)."""

    def test_key(self):
        assert transaction_key_bytes("tx-1") == hexbytes("0000 0004 74782d31")
        assert decode_key(hexbytes("0000 0004 74782d31")) == "tx-1"

    def test_value_v0_ongoing_two_topics(self):
        value = hexbytes("""0000  0000000000000007  0001  0000ea60  01
                            00000002  0001 61 00000001 00000000   0001 62 00000002 00000000 00000003
                            0000000000000064  0000000000000032""")
        tid, state = decode_record(transaction_key_bytes("tx"), value)
        assert state is not None
        assert (tid, state.version, state.producer_id, state.producer_epoch, state.timeout_ms) == ("tx", 0, 7, 1, 60000)
        assert state.status_name == "Ongoing" and state.partitions == (("a", (0,)), ("b", (0, 3)))
        assert (state.last_update_ms, state.start_ms) == (100, 50) and state.topics == {"a", "b"}
        assert state.value_bytes() == value

    def test_value_v0_null_partitions(self):
        value = hexbytes("0000 0000000000000007 0000 0000ea60 04 ffffffff 0000000000000064 0000000000000064")
        state = decode_record(b"\0\0\0\x01x", value)[1]
        assert state is not None and state.partitions is None

    def test_value_v1_compact_and_tagged(self):
        # tags 0 (PreviousProducerId = 6) and 2 (ClientTransactionVersion = 2); tag 1 absent keeps its default -1
        value = hexbytes("""0001  0000000000000007  0001  0000ea60  02
                            02  02 61 02 00000005 00
                            0000000000000064  0000000000000032
                            02  00 08 0000000000000006  02 02 0002""")
        _, state = decode_record(transaction_key_bytes("tx"), value)
        assert state is not None
        assert state.version == 1 and state.status_name == "PrepareCommit" and state.partitions == (("a", (5,)),)
        assert (state.previous_producer_id, state.next_producer_id, state.client_transaction_version) == (6, -1, 2)
        assert state.value_bytes() == value

    def test_value_v1_unknown_tag_is_skipped_by_its_size(self):
        value = hexbytes("0001 0000000000000007 0001 0000ea60 04 01 0000000000000064 0000000000000064 "
                         "01 05 03 aabbcc")
        state = decode_record(transaction_key_bytes("tx"), value)[1]
        assert state is not None and state.partitions == ()

    def test_tombstone(self):
        assert decode_record(transaction_key_bytes("gone"), None) == ("gone", None)


class TestStrict:
    @pytest.mark.parametrize("value, words", [
        (hexbytes("0002 00"), "unknown version 2, supported [0, 1]"),
        (hexbytes("0000 00000000"), "truncated"),
        (TransactionState("t", 0, 1, 0, 1, 4, (), 0, 0).value_bytes() + b"\0", "1 trailing bytes"),
        (hexbytes("0000 0000000000000007 0000 0000ea60 04 7fffffff"), "count 2147483647 exceeds"),
        (hexbytes("0001 0000000000000007 0000 0000ea60 04 01 0000000000000064 0000000000000064 "
                  "02 05 01 00 03 01 00"), "not ascending"),
        (hexbytes("0001 0000000000000007 0000 0000ea60 04 01 0000000000000064 0000000000000064 01 00 09 00"),
         "truncated"),
        (hexbytes("0001 0000000000000007 0000 0000ea60 04 01 0000000000000064 0000000000000064 01 02 03 000200"),
         "size 3 but the value took 2"),
        (hexbytes("0001 0000000000000007 0000 0000ea60 04 02 00"), "null strings are not allowed"),
        ("not bytes", "must be bytes"),
    ])
    def test_refused_naming_what(self, value, words):
        with pytest.raises(WireFormatError, match=words.replace("[", r"\[").replace("]", r"\]")):
            decode_record(transaction_key_bytes("t"), value)

    def test_key_of_unknown_version(self):
        with pytest.raises(WireFormatError, match="TransactionLogKey: unknown version 1"):
            decode_key(hexbytes("0001 0001 61"))

    def test_varint_too_long(self):
        with pytest.raises(WireFormatError, match="longer than 5 bytes"):
            UVARINT.decode("x", b"\xff" * 6, 0)


@given(states())
def test_round_trip(state):
    assert decode_record(state.key_bytes(), state.value_bytes()) == (state.transactional_id, state)


@given(st.integers(0, 2**32 - 1))
def test_varint_round_trip(n):
    raw = UVARINT.encode("n", n)
    assert UVARINT.decode("n", raw, 0) == (n, len(raw))


@given(st.binary(max_size=80))
def test_arbitrary_bytes_decode_or_raise_wire_format_error(raw):
    try:
        decode_record(transaction_key_bytes("t"), raw)
    except WireFormatError:
        pass


def test_fold_unions_topics_per_id_and_forgets_expired_ids():
    def rec(tid, topics_, status=1):
        s = TransactionState(tid, 0, 1, 0, 60000, status, tuple((t, (0,)) for t in topics_), 0, 0)
        return s.key_bytes(), s.value_bytes()

    reading = read_transaction_log([
        rec("pay", ["payments"]), rec("pay", ["ledger"]), rec("pay", [], 4),  # completed: empty partitions
        rec("old", ["x", "y"]), (transaction_key_bytes("old"), None),       # expired
        rec("idle", []), (b"\0\x09junk", b""),                              # a record of an unknown shape
    ])
    assert reading.writes == {"pay": frozenset({"payments", "ledger"})}
    assert (reading.records, reading.undecodable) == (7, 1) and "unknown version 9" in (reading.first_problem or "")
