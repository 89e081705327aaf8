"""__transaction_state records captured from the test bed's real brokers, pinned byte for byte.

Captured once (2026-11-27) by a transactional producer (confluent-kafka, ``transactional.id`` ``kf-txvec-<cluster>``)
writing one record to each of two topics ``kf-txvec-<cluster>.a`` / ``.b`` in one committed transaction, then reading
``__transaction_state`` raw (assigned, read_uncommitted) and keeping that id's records in offset order: the
coordinator's Empty (init), Ongoing (both partitions), PrepareCommit and CompleteCommit states. Kafka 3.9 (the
source) writes TransactionLogValue version 0; Kafka 4.3 (the destination) writes the flexible version 1 with the
tagged PreviousProducerId. Each value decodes to what the coordinator said and encodes back to the same bytes.
"""

from __future__ import annotations

import pytest

from kafka_ferry.core.units.transaction_log import decode_record, read_transaction_log

KEY_39 = "0000 000e 6b662d74787665632d7372633339"  # "kf-txvec-src39"
KEY_43 = "0000 000e 6b662d74787665632d6473743433"  # "kf-txvec-dst43"
A39, B39 = "kf-txvec-src39.a", "kf-txvec-src39.b"
A43, B43 = "kf-txvec-dst43.a", "kf-txvec-dst43.b"

# (key, value, status, partitions, last update, start, previous producer id)
CAPTURED = {
    "3.9 Empty": (KEY_39, "0000 00000000000003f8 0000 0000ea60 00 ffffffff 000001a21ac00f66 ffffffffffffffff",
                  "Empty", None, 1795745124198, -1, -1),
    "3.9 Ongoing": (KEY_39, "0000 00000000000003f8 0000 0000ea60 01 00000002"
                            " 0010 6b662d74787665632d73726333392e61 00000001 00000000"
                            " 0010 6b662d74787665632d73726333392e62 00000001 00000000"
                            " 000001a21ac00f76 000001a21ac00f76",
                    "Ongoing", ((A39, (0,)), (B39, (0,))), 1795745124214, 1795745124214, -1),
    "3.9 PrepareCommit": (KEY_39, "0000 00000000000003f8 0000 0000ea60 02 00000002"
                                  " 0010 6b662d74787665632d73726333392e61 00000001 00000000"
                                  " 0010 6b662d74787665632d73726333392e62 00000001 00000000"
                                  " 000001a21ac00f7c 000001a21ac00f76",
                          "PrepareCommit", ((A39, (0,)), (B39, (0,))), 1795745124220, 1795745124214, -1),
    "3.9 CompleteCommit": (KEY_39, "0000 00000000000003f8 0000 0000ea60 04 00000000 000001a21ac00f7c "
                                   "000001a21ac00f76",
                           "CompleteCommit", (), 1795745124220, 1795745124214, -1),
    "4.3 Empty": (KEY_43, "0001 00000000000013ee 0000 0000ea60 00 00 000001a21ac01ef4 ffffffffffffffff"
                          " 01 00 08 00000000000013ee",
                  "Empty", None, 1795745128180, -1, 5102),
    "4.3 Ongoing": (KEY_43, "0001 00000000000013ee 0000 0000ea60 01 03"
                            " 11 6b662d74787665632d64737434332e61 02 00000000 00"
                            " 11 6b662d74787665632d64737434332e62 02 00000000 00"
                            " 000001a21ac01efe 000001a21ac01efe 01 00 08 00000000000013ee",
                    "Ongoing", ((A43, (0,)), (B43, (0,))), 1795745128190, 1795745128190, 5102),
    "4.3 PrepareCommit": (KEY_43, "0001 00000000000013ee 0000 0000ea60 02 03"
                                  " 11 6b662d74787665632d64737434332e61 02 00000000 00"
                                  " 11 6b662d74787665632d64737434332e62 02 00000000 00"
                                  " 000001a21ac01f03 000001a21ac01efe 01 00 08 00000000000013ee",
                          "PrepareCommit", ((A43, (0,)), (B43, (0,))), 1795745128195, 1795745128190, 5102),
    "4.3 CompleteCommit": (KEY_43, "0001 00000000000013ee 0000 0000ea60 04 01 000001a21ac01f04 000001a21ac01efe"
                                   " 01 00 08 00000000000013ee",
                           "CompleteCommit", (), 1795745128196, 1795745128190, 5102),
}


def raw(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


@pytest.mark.parametrize("label", CAPTURED)
def test_captured_record_decodes_and_encodes_back(label):
    key, value, status, partitions, last_update, start, previous = CAPTURED[label]
    tid, state = decode_record(raw(key), raw(value))
    assert state is not None
    assert tid == ("kf-txvec-src39" if label.startswith("3.9") else "kf-txvec-dst43")
    assert state.version == (0 if label.startswith("3.9") else 1)
    assert (state.producer_id, state.producer_epoch, state.timeout_ms) == (
        (1016, 0, 60000) if label.startswith("3.9") else (5102, 0, 60000))
    assert (state.status_name, state.partitions) == (status, partitions)
    assert (state.last_update_ms, state.start_ms, state.previous_producer_id) == (last_update, start, previous)
    assert (state.next_producer_id, state.client_transaction_version) == (-1, 0)
    assert state.value_bytes() == raw(value) and state.key_bytes() == raw(key)


@pytest.mark.parametrize("cluster", ["3.9", "4.3"])
def test_the_log_of_one_transaction_couples_both_topics(cluster):
    reading = read_transaction_log([(raw(k), raw(v)) for label, (k, v, *_) in CAPTURED.items()
                                    if label.startswith(cluster)])
    assert reading.undecodable == 0 and reading.records == 4
    assert reading.writes == ({"kf-txvec-src39": {A39, B39}} if cluster == "3.9" else {"kf-txvec-dst43": {A43, B43}})
