"""The final copy's "anything new?" check: true only where a copy plan now would be empty and record no gap, so the
promotion skips its batches (no lease, no plan, no Spark job) exactly when they would copy nothing. The clusters are
the in-memory ones of ``tests/fakes``; the progress is the real state records on the fake destination."""

from __future__ import annotations

import pytest
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore

from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.promotion.readiness import nothing_to_copy, replication_lag
from kafka_ferry.state.progress import save_progress

RECORD = (b"k", b"v", None)


@pytest.fixture
def source() -> FakeCluster:
    cluster = FakeCluster("source")
    cluster.create_topic("t", 2, 1, {})
    cluster.produce("t", 0, *[RECORD] * 5)
    return cluster


@pytest.fixture
def store() -> FakeStateStore:
    return FakeStateStore(FakeCluster("destination")).created()


def copied(store: FakeStateStore, partition: int, next_offset: int) -> None:
    save_progress(store, [PartitionProgress("t", partition, "t", next_offset, next_offset - 1, next_offset - 1,
                                            next_offset)])


def test_a_copy_at_every_end_with_empty_partitions_uncopied_has_nothing_to_copy(source, store):
    copied(store, 0, 5)  # partition 1 holds nothing: the planner never wrote progress for it
    assert nothing_to_copy(source, store, ["t"])
    assert replication_lag(source, store, ["t"])["max_lag"] == 0


def test_a_new_record_anywhere_is_something_to_copy(source, store):
    copied(store, 0, 5)
    source.produce("t", 1, RECORD)  # a partition without progress gets its first record
    assert not nothing_to_copy(source, store, ["t"])
    copied(store, 1, 1)
    assert nothing_to_copy(source, store, ["t"])
    source.produce("t", 0, RECORD)  # and one behind the stored progress
    assert not nothing_to_copy(source, store, ["t"])


def test_a_log_start_past_the_copy_is_a_gap_for_the_plan_not_nothing_new(source, store):
    copied(store, 0, 3)
    source.truncate("t", 0, 5)  # retention dropped 3 and 4 before the copy read them: lag 0, yet not nothing
    assert replication_lag(source, store, ["t"])["max_lag"] == 0
    assert not nothing_to_copy(source, store, ["t"])
