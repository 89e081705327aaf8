"""promotion.reconcile on the in-memory clusters of ``tests/fakes``: the copied ranges of both sides read record by
record (keys, values, headers, timestamps), a difference located at its first position, records past the progress
counted, and the source range starting at the log start retention left."""

from __future__ import annotations

import pytest
from fakes.cluster import FakeCluster

from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.offsets.offset_decisions import partition_copy
from kafka_ferry.promotion.reconcile import ReconciliationMismatch, reconcile_copies

TS = 1_700_000_000_000
RECORDS = [(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(5)]


def clusters(destination_records=RECORDS) -> tuple[FakeCluster, FakeCluster]:
    source, destination = FakeCluster("source"), FakeCluster("destination")
    source.create_topic("t", 1, 1, {})
    destination.create_topic("t.dst", 1, 1, {})
    source.produce("t", 0, *RECORDS, timestamp_ms=TS)
    destination.produce("t.dst", 0, *destination_records, timestamp_ms=TS)
    return source, destination


def copy_of(source: FakeCluster, destination: FakeCluster, copied: int = 5):
    """The copy's view of t-0: ``copied`` records copied at the same offsets (syncs at both ends)."""
    start, end = source.list_offsets([("t", 0)], "earliest")[("t", 0)], destination.list_offsets([("t.dst", 0)])
    progress = PartitionProgress("t", 0, "t.dst", copied, copied - 1, copied - 1, copied)
    return partition_copy(progress, [(0, 0), (copied - 1, copied - 1)], start, 0, end[("t.dst", 0)])


def test_an_exact_copy_matches_record_for_record():
    source, destination = clusters()
    report = reconcile_copies(source, destination, [copy_of(source, destination)])
    assert report.ok and report.as_dict()["records_checked"] == 5
    assert [(p.source_range, p.destination_range) for p in report.partitions] == [((0, 5), (0, 5))]


def test_a_changed_value_header_or_timestamp_is_a_difference_at_its_position():
    changed = [*RECORDS[:2], (b"k2", b"v2", [("h", b"other")]), *RECORDS[3:]]
    source, destination = clusters(changed)
    report = reconcile_copies(source, destination, [copy_of(source, destination)])
    assert report.mismatched[0].first_difference == {"index": 2, "source_offset": 2, "destination_offset": 2}
    with pytest.raises(ReconciliationMismatch, match=r"t-0 \[0, 5\]: 5 records vs t.dst-0 \[0, 5\]: 5 records"):
        report.raise_if_mismatched()
    source, destination = clusters()
    destination.topics["t.dst"].partitions[0].records[4] = (b"k4", b"v4", TS + 1, [("h", b"4")])
    assert not reconcile_copies(source, destination, [copy_of(source, destination)]).ok  # the timestamp counts


def test_records_a_crashed_batch_wrote_past_the_progress_count_as_a_difference():
    source, destination = clusters([*RECORDS, (b"k5", b"v5", None)])
    report = reconcile_copies(source, destination, [copy_of(source, destination)])
    (p,) = report.mismatched
    assert (p.source_count, p.destination_count) == (5, 6)
    assert p.first_difference == {"index": 5, "destination_offset": 5, "only_on": "destination"}


def test_the_source_range_starts_at_the_log_start_retention_left_and_the_destination_where_it_maps():
    source, destination = clusters()
    source.truncate("t", 0, 2)
    report = reconcile_copies(source, destination, [copy_of(source, destination)])
    assert [(p.source_range, p.destination_range) for p in report.partitions] == [((2, 5), (2, 5))]
    assert report.ok and report.partitions[0].source_count == 3
