"""The promotion's, the batches' and the gap ledger's records as ``state/`` writes and reads them, through the
declared kinds' own encoding (``core.common.state_records``): keys, tombstones, and what a reader gets back. The store
is the real ``MigrationStateStore`` on the in-memory cluster of ``tests/fakes`` (``log``: the state topic's records)."""

from __future__ import annotations

import pytest
from fakes.state import FakeStateStore

from kafka_ferry.core.batches.batch_planning import RetentionGap
from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.core.common.state_records import GAP_KIND, PROMOTION_KIND, ROLLBACK_KIND
from kafka_ferry.core.offsets.offset_decisions import OffsetDecision
from kafka_ferry.state.batches import STATE_FIELDS, batch_history, save_batch
from kafka_ferry.state.gaps import save_gaps
from kafka_ferry.state.offset_decisions import stored_decisions
from kafka_ferry.state.promotion import (
    RollbackStillPossible,
    completed_steps,
    promotion_records,
    promotion_status,
    reset_promotion,
    rollback_possible,
    save_final_translation,
    save_promoted,
    save_step_done,
)


def _decision(group: str, partition: int, downstream: int) -> OffsetDecision:
    return OffsetDecision(group, "t", partition, "d", downstream + 2, downstream, "exact-run", "r")


def test_a_new_final_translation_replaces_the_groups_of_an_earlier_one():
    store = FakeStateStore().created()
    save_final_translation(store, {"a": [_decision("a", 0, 1).as_dict()], "b": [_decision("b", 0, 2).as_dict()]},
                           promotion_records(store))
    save_final_translation(store, {"b": [_decision("b", 0, 5).as_dict()]}, promotion_records(store))
    assert sorted(promotion_records(store)) == ["translation/b"]
    assert [(d.group, d.downstream_offset) for d in stored_decisions(promotion_records(store))] == [("b", 5)]
    assert (b"promotion/translation/a", None) in store.log  # a tombstone, not a record left behind


def test_steps_are_done_in_their_order_once_marked():
    store = FakeStateStore().created()
    save_step_done(store, "commit_offsets", {"groups": 1}, 0.12345)
    save_step_done(store, "final_copy", {}, 1.0)
    records = promotion_records(store)
    assert completed_steps(records, ["final_copy", "final_translation", "commit_offsets"]) == [
        "final_copy", "commit_offsets"]
    assert records["step/commit_offsets"]["duration_s"] == 0.123


def test_the_promoted_mark_names_topics_and_groups_and_a_reset_removes_every_promotion_record():
    store = FakeStateStore().created()
    assert promotion_status(store) is None
    save_step_done(store, "final_copy", {}, 1.0)
    save_promoted(store, {"orders": "eu.orders"}, ["g2", "g1"], 1000)
    assert promotion_status(store) == {"status": "promoted", "promoted_at_ms": 1000, "topics": ["orders"],
                                       "groups": ["g1", "g2"], "written_at_ms": 1}
    assert promotion_records(store)["topic/orders"]["destination_topic"] == "eu.orders"
    assert reset_promotion(store, give_up_rollback=True) == [
        "group/g1", "group/g2", "migration", "step/final_copy", "topic/orders"]
    assert store.read_kind(PROMOTION_KIND) == {} and promotion_status(store) is None
    assert reset_promotion(store) == []


def test_a_reset_is_refused_while_the_promotion_can_be_rolled_back_unless_the_rollback_is_given_up():
    """The promotion's records are what a rollback reads: deleting them would lose the way back (issue 35)."""
    store = FakeStateStore().created()
    save_promoted(store, {"orders": "eu.orders"}, ["g1"], 1000)
    assert rollback_possible(store)
    before = list(store.log)
    with pytest.raises(RollbackStillPossible) as refused:
        reset_promotion(store)
    assert "kafka-ferry rollback <spec>" in str(refused.value) and "--give-up-rollback" in str(refused.value)
    assert "nothing was changed" in str(refused.value) and retry_cannot_help(refused.value)
    assert store.log == before  # nothing written

    store.put(ROLLBACK_KIND, "migration", {"status": "rolled-back", "promoted_at_ms": 999})  # an earlier promotion's
    assert rollback_possible(store)
    store.put(ROLLBACK_KIND, "migration", {"status": "rolled-back", "promoted_at_ms": 1000})  # this one's: done
    assert not rollback_possible(store)
    assert reset_promotion(store) == ["group/g1", "migration", "topic/orders"]  # what the rollback's last step does


def test_a_reset_told_the_rollback_is_given_up_removes_the_records():
    store = FakeStateStore().created()
    save_promoted(store, {"orders": "eu.orders"}, ["g1"], 1000)
    assert reset_promotion(store, give_up_rollback=True) == ["group/g1", "migration", "topic/orders"]
    assert not rollback_possible(store)


def test_a_gap_is_keyed_by_its_first_lost_offset_and_a_wider_loss_replaces_it():
    store = FakeStateStore().created()
    save_gaps(store, [RetentionGap("t", 0, 10, 20)], "batch-1", 5)
    save_gaps(store, [RetentionGap("t", 0, 10, 30)], "batch-2", 6)
    assert store.read_kind(GAP_KIND) == {"t:0@10": {
        "topic": "t", "partition": 0, "lost_start": 10, "lost_end": 30, "lost_count": 20, "batch_id": "batch-2",
        "recorded_at_ms": 6, "written_at_ms": 1}}


def test_batch_history_is_oldest_first_and_keeps_totals_not_partition_rows():
    store = FakeStateStore().created()
    fields = dict.fromkeys((f for f in STATE_FIELDS if f not in ("batch_id", "finished_at_ms")), 0)
    for batch_id, finished in (("b2", 20), ("b1", 10)):
        save_batch(store, {**fields, "batch_id": batch_id, "finished_at_ms": finished, "report_path": f"/r/{batch_id}",
                           "partitions": [{"partition": 0}]})
    history = batch_history(store)
    assert [b["batch_id"] for b in history] == ["b1", "b2"]
    assert "partitions" not in history[0] and history[0]["report_path"] == "/r/b1"
