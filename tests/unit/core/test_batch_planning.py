"""A batch's ranges: retention gaps, deterministic ids and balanced task groups (the plan itself: copy.plan)."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.batches.batch_planning import (
    PartitionPosition,
    PartitionRange,
    RetentionGap,
    RetentionGapError,
    compute_batch_id,
    plan_ranges,
    split_into_task_groups,
)


class Planned(NamedTuple):
    batch_id: str
    ranges: tuple[PartitionRange, ...]
    gaps: tuple[RetentionGap, ...]


def plan_batch(*args, **kwargs) -> Planned:
    return Planned(*plan_ranges(*args, **kwargs))


def pos(partition, stored, log_start, end, topic="orders"):
    return PartitionPosition(topic, partition, stored, log_start, end)


class TestRanges:
    def test_first_run_starts_at_log_start(self):
        plan = plan_batch([pos(0, None, 40, 100)], max_records_per_partition=1000)
        assert plan.ranges == (PartitionRange("orders", 0, 40, 100),)
        assert plan.gaps == ()

    def test_continues_from_stored_offset_and_caps_records(self):
        plan = plan_batch([pos(0, 50, 0, 1000)], max_records_per_partition=100)
        assert plan.ranges == (PartitionRange("orders", 0, 50, 150),)

    def test_caught_up_partitions_are_dropped(self):
        plan = plan_batch([pos(0, 100, 0, 100), pos(1, None, 7, 7)], max_records_per_partition=10)
        assert plan.ranges == ()

    def test_biggest_partitions_first_ties_by_name(self):
        plan = plan_batch(
            [pos(0, 90, 0, 100), pos(1, 0, 0, 500), pos(0, 0, 0, 10, topic="a"), pos(2, 0, 0, 10)],
            max_records_per_partition=1000,
        )
        assert [(r.topic, r.partition, r.offset_count) for r in plan.ranges] == [
            ("orders", 1, 500),
            ("a", 0, 10),
            ("orders", 0, 10),
            ("orders", 2, 10),
        ]
        assert sum(r.offset_count for r in plan.ranges) == 530

    @given(
        st.lists(
            st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=20
        ),
        st.integers(1, 10**5),
    )
    def test_ranges_within_source_and_cap(self, raw, cap):
        positions = []
        for partition, values in enumerate(raw):
            log_start, stored, end = sorted(values)
            positions.append(pos(partition, stored, log_start, end))
        plan = plan_batch(positions, max_records_per_partition=cap)
        by_partition = {p.partition: p for p in positions}
        for r in plan.ranges:
            p = by_partition[r.partition]
            assert r.start_offset == p.stored_next_offset
            assert r.start_offset < r.end_offset <= min(p.end_offset, r.start_offset + cap)
        assert len(plan.ranges) == sum(p.stored_next_offset < p.end_offset for p in positions)
        counts = [r.offset_count for r in plan.ranges]
        assert counts == sorted(counts, reverse=True)


class TestRetentionGaps:
    def test_raises_listing_every_lost_range(self):
        positions = [pos(0, 10, 50, 100), pos(1, 60, 50, 100), pos(2, 0, 5, 6, topic="audit")]
        with pytest.raises(RetentionGapError) as info:
            plan_batch(positions, max_records_per_partition=10)
        assert info.value.gaps == (RetentionGap("audit", 2, 0, 5), RetentionGap("orders", 0, 10, 50))
        message = str(info.value)
        assert "orders-0 [10, 50) 40 offsets" in message
        assert "audit-2 [0, 5) 5 offsets" in message
        assert "accept_retention_gaps=True" in message

    def test_accepted_gaps_are_recorded_and_copy_resumes_at_log_start(self):
        plan = plan_batch([pos(0, 10, 50, 100), pos(1, 60, 50, 100)], 1000, accept_retention_gaps=True)
        assert plan.gaps == (RetentionGap("orders", 0, 10, 50),)
        assert PartitionRange("orders", 0, 50, 100) in plan.ranges
        assert PartitionRange("orders", 1, 60, 100) in plan.ranges

    def test_gap_on_empty_source_is_still_reported(self):
        plan = plan_batch([pos(0, 3, 9, 9)], 10, accept_retention_gaps=True)
        assert plan.ranges == ()
        assert plan.gaps == (RetentionGap("orders", 0, 3, 9),)

    def test_stored_equal_to_log_start_is_no_gap(self):
        assert plan_batch([pos(0, 50, 50, 60)], 10).gaps == ()

    def test_a_gap_a_streams_application_purged_after_consuming_refuses_nothing_and_is_still_recorded(self):
        # A repartition topic: Streams deletes records up to its committed offset. [10, 50) was consumed (commit
        # 55), so nothing is lost; partition 1's purge passed its commit (impossible for Streams; a real loss).
        positions = [pos(p, 10, 50, 100, topic="wc-words-repartition") for p in (0, 1)]
        plan = plan_batch(positions[:1], 1000, consumed_below={("wc-words-repartition", 0): 55})
        assert plan.gaps == (RetentionGap("wc-words-repartition", 0, 10, 50),)
        assert plan.ranges == (PartitionRange("wc-words-repartition", 0, 50, 100),)
        assert plan_batch(positions[:1], 1000, consumed_below={("wc-words-repartition", 0): 50}).gaps
        with pytest.raises(RetentionGapError) as info:
            plan_batch(positions, 1000, consumed_below={("wc-words-repartition", 0): 55,
                                                        ("wc-words-repartition", 1): 49})
        assert info.value.gaps == (RetentionGap("wc-words-repartition", 1, 10, 50),)


class TestBatchId:
    def test_same_inputs_same_id_in_any_order(self):
        positions = [pos(p, 0, 0, 10 * (p + 1)) for p in range(5)]
        first = plan_batch(positions, 25)
        assert plan_batch(list(reversed(positions)), 25).batch_id == first.batch_id
        assert first.batch_id.startswith("batch-")

    def test_different_ranges_or_caps_change_the_id(self):
        base = plan_batch([pos(0, 0, 0, 100)], 50)
        assert plan_batch([pos(0, 0, 0, 100)], 60).batch_id != base.batch_id
        assert plan_batch([pos(0, 1, 0, 100)], 50).batch_id != base.batch_id
        assert plan_batch([pos(0, 0, 0, 100)], 50, max_bytes_per_partition=10).batch_id != base.batch_id

    def test_growing_source_beyond_cap_keeps_the_id(self):
        assert plan_batch([pos(0, 0, 0, 100)], 50).batch_id == plan_batch([pos(0, 0, 0, 900)], 50).batch_id

    def test_gaps_are_part_of_the_id(self):
        with_gap = plan_batch([pos(0, 5, 10, 20)], 50, accept_retention_gaps=True)
        without = plan_batch([pos(0, 10, 10, 20)], 50)
        assert with_gap.ranges == without.ranges
        assert with_gap.batch_id != without.batch_id

    def test_compute_batch_id_matches_plan(self):
        plan = plan_batch([pos(0, 0, 0, 100)], 50, max_bytes_per_partition=7)
        assert compute_batch_id(plan.ranges, plan.gaps, 50, 7) == plan.batch_id


class TestValidation:
    @pytest.mark.parametrize(
        ("args", "pattern"),
        [
            (("t", 0, None, -1, 5), r"t-0: log_start_offset must be an int >= 0"),
            (("t", 1, None, 5, 4), r"t-1: end_offset 4 < log_start_offset 5"),
            (("t", 2, -3, 0, 4), r"t-2: stored_next_offset must be an int >= 0"),
            (("t", 3, 9, 0, 4), r"t-3: stored_next_offset 9 is beyond the source end 4"),
            (("t", -1, 0, 0, 4), r"partition must be an int >= 0"),
            (("", 0, 0, 0, 4), r"topic must be a non-empty str"),
            (("t", 0, 1.5, 0, 4), r"stored_next_offset must be an int"),
        ],
    )
    def test_position(self, args, pattern):
        with pytest.raises(ValueError, match=pattern):
            PartitionPosition(*args)

    def test_range(self):
        with pytest.raises(ValueError, match=r"t-4: end_offset 3 < start_offset 5"):
            PartitionRange("t", 4, 5, 3)
        with pytest.raises(ValueError, match=r"t-4: start_offset must be an int >= 0"):
            PartitionRange("t", 4, -1, 3)

    def test_gap(self):
        with pytest.raises(ValueError, match="empty"):
            RetentionGap("t", 0, 5, 5)

    def test_duplicate_partition(self):
        with pytest.raises(ValueError, match="orders-0: partition given twice"):
            plan_batch([pos(0, 0, 0, 1), pos(0, 0, 0, 1)], 10)

    @pytest.mark.parametrize(("records", "size"), [(0, None), (-5, None), (10, 0)])
    def test_caps(self, records, size):
        with pytest.raises(ValueError, match="max_"):
            plan_batch([pos(0, 0, 0, 1)], records, max_bytes_per_partition=size)


class TestTaskGroups:
    def test_balances_and_never_splits_a_partition(self):
        ranges = [PartitionRange("t", p, 0, n) for p, n in enumerate([50, 40, 30, 30, 20, 10])]
        groups = split_into_task_groups(ranges, 3)
        assert [sum(r.offset_count for r in g) for g in groups] == [60, 60, 60]
        assert sorted((r.partition, r) for g in groups for r in g) == list(enumerate(ranges))

    def test_fewer_ranges_than_tasks(self):
        ranges = [PartitionRange("t", 0, 0, 5), PartitionRange("t", 1, 0, 9)]
        assert split_into_task_groups(ranges, 8) == ((ranges[1],), (ranges[0],))
        assert split_into_task_groups([], 4) == ()

    def test_rejects_duplicate_partition_and_bad_count(self):
        with pytest.raises(ValueError, match="split across tasks"):
            split_into_task_groups([PartitionRange("t", 0, 0, 5), PartitionRange("t", 0, 5, 9)], 2)
        with pytest.raises(ValueError, match="task_count"):
            split_into_task_groups([], 0)

    @given(st.lists(st.integers(0, 10**6), max_size=40), st.integers(1, 16))
    def test_every_partition_in_exactly_one_group_and_near_balanced(self, sizes, task_count):
        ranges = [PartitionRange("t", p, 0, n) for p, n in enumerate(sizes)]
        groups = split_into_task_groups(ranges, task_count)
        placed = [r.partition for g in groups for r in g]
        assert sorted(placed) == list(range(len(sizes)))
        assert len(groups) == min(task_count, len(sizes))
        loads = [sum(r.offset_count for r in g) for g in groups]
        assert loads == sorted(loads, reverse=True)
        if sizes:
            # Greedy onto the lightest group: the heaviest is within one range of the ideal share.
            assert loads[0] <= sum(sizes) / len(groups) + max(sizes)
