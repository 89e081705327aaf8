"""The sync emission rules, and the run/hole invariant they buy, checked after every update."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.offsets.offset_sync_policy import PartitionSyncTracker, SyncPoint, is_contiguous


def feed(tracker: PartitionSyncTracker, records) -> list[list[SyncPoint]]:
    return [tracker.observe(up, down) for up, down in records]


def contiguous(up: int, down: int, count: int) -> list[tuple[int, int]]:
    return [(up + i, down + i) for i in range(count)]


class TestRules:
    def test_first_record_is_emitted(self):
        assert PartitionSyncTracker(100).observe(42, 7) == [(42, 7)]

    def test_interval_one_emits_every_record(self):
        tracker = PartitionSyncTracker(1)
        assert feed(tracker, contiguous(0, 0, 4)) == [[(0, 0)], [(1, 1)], [(2, 2)], [(3, 3)]]
        assert tracker.finish() == []

    def test_interval_spacing_and_finish(self):
        tracker = PartitionSyncTracker(3)
        emitted = [s for batch in feed(tracker, contiguous(10, 100, 11)) for s in batch]
        assert emitted == [(10, 100), (13, 103), (16, 106), (19, 109)]
        assert tracker.finish() == [(20, 110)]

    def test_upstream_hole_emits_both_sides(self):
        tracker = PartitionSyncTracker(100)
        assert feed(tracker, [(0, 0), (1, 1), (2, 2), (5, 3), (6, 4)]) == [[(0, 0)], [], [], [(2, 2), (5, 3)], []]
        assert tracker.finish() == [(6, 4)]

    def test_downstream_hole_emits_both_sides(self):
        tracker = PartitionSyncTracker(100)
        assert feed(tracker, [(0, 0), (1, 1), (2, 5)]) == [[(0, 0)], [], [(1, 1), (2, 5)]]

    def test_previous_already_emitted_is_not_repeated(self):
        tracker = PartitionSyncTracker(100)
        assert feed(tracker, [(0, 0), (3, 1), (9, 2)]) == [[(0, 0)], [(3, 1)], [(9, 2)]]
        assert tracker.finish() == []

    def test_interval_counter_restarts_after_discontinuity(self):
        tracker = PartitionSyncTracker(2)
        emitted = feed(tracker, [(0, 0), (1, 1), (5, 2), (6, 3), (7, 4)])
        assert emitted == [[(0, 0)], [], [(1, 1), (5, 2)], [], [(7, 4)]]

    def test_emissions_are_sync_points(self):
        (point,) = PartitionSyncTracker(1).observe(3, 4)
        assert isinstance(point, SyncPoint)
        assert (point.upstream_offset, point.downstream_offset) == (3, 4)

    def test_is_contiguous(self):
        assert is_contiguous((1, 1), (2, 2))
        assert not is_contiguous((1, 1), (3, 2))
        assert not is_contiguous((1, 1), (2, 3))


class TestBatches:
    def test_first_record_of_resumed_batch_is_emitted_even_if_contiguous(self):
        tracker = PartitionSyncTracker(100, previous=(9, 19))
        assert tracker.observe(10, 20) == [(10, 20)]
        assert tracker.observe(11, 21) == []
        assert tracker.finish() == [(11, 21)]

    def test_resume_method_equals_constructor_argument(self):
        tracker = PartitionSyncTracker(5)
        tracker.resume(9, 19)
        assert tracker.last_observed == (9, 19)
        assert tracker.last_emitted == (9, 19)
        assert tracker.observe(12, 20) == [(12, 20)]

    def test_same_tracker_continues_across_batches(self):
        tracker = PartitionSyncTracker(100)
        assert feed(tracker, contiguous(0, 0, 3)) == [[(0, 0)], [], []]
        assert tracker.finish() == [(2, 2)]
        assert not tracker.batch_open
        assert tracker.observe(3, 3) == [(3, 3)]
        assert tracker.batch_open

    def test_finish_is_idempotent_and_safe_on_empty_batch(self):
        tracker = PartitionSyncTracker(100)
        assert tracker.finish() == []
        tracker.observe(0, 0)
        tracker.observe(1, 1)
        assert tracker.finish() == [(1, 1)]
        assert tracker.finish() == []

    def test_resume_with_open_batch_refuses(self):
        tracker = PartitionSyncTracker(100)
        tracker.observe(0, 0)
        with pytest.raises(RuntimeError, match="finish"):
            tracker.resume(5, 5)

    def test_resumed_offsets_must_keep_increasing(self):
        tracker = PartitionSyncTracker(100, previous=(10, 10))
        with pytest.raises(ValueError, match="strictly increase"):
            tracker.observe(10, 11)
        with pytest.raises(ValueError, match="strictly increase"):
            tracker.observe(11, 10)


class TestValidation:
    @pytest.mark.parametrize("interval", [0, -1, 1.5, True, None])
    def test_interval(self, interval):
        with pytest.raises(ValueError, match="interval"):
            PartitionSyncTracker(interval)

    @pytest.mark.parametrize(("up", "down"), [(-1, 0), (0, -1), (1.0, 0), (0, None)])
    def test_offsets(self, up, down):
        with pytest.raises(ValueError, match="must be an int >= 0"):
            PartitionSyncTracker(1).observe(up, down)

    @pytest.mark.parametrize("second", [(5, 6), (4, 6), (6, 5), (6, 4), (3, 3)])
    def test_going_backwards(self, second):
        tracker = PartitionSyncTracker(1)
        tracker.observe(5, 5)
        with pytest.raises(ValueError, match="strictly increase"):
            tracker.observe(*second)


@st.composite
def copied_records(draw) -> list[tuple[int, int]]:
    """A partition copied in order: runs separated by upstream holes and (sometimes) downstream holes."""
    up = draw(st.integers(0, 10**6))
    down = draw(st.integers(0, 10**6))
    records = []
    for run_length, up_gap, down_gap in draw(
        st.lists(
            st.tuples(st.integers(1, 25), st.integers(1, 6), st.sampled_from([1, 1, 1, 2, 4])), min_size=1, max_size=8
        )
    ):
        records.extend(contiguous(up, down, run_length))
        up, down = records[-1][0] + up_gap, records[-1][1] + down_gap
    return records


def assert_invariant(syncs: list[tuple[int, int]], records: list[tuple[int, int]], interval: int) -> None:
    """Consecutive syncs are a contiguous run of at most ``interval`` records, or adjacent across a hole."""
    index = {record: i for i, record in enumerate(records)}
    assert all(s in index for s in syncs), "every sync is a copied record"
    positions = [index[s] for s in syncs]
    assert positions == sorted(set(positions)), "syncs are emitted once each, in order"
    for s1, s2 in zip(syncs, syncs[1:], strict=False):
        i1, i2 = index[s1], index[s2]
        if all(is_contiguous(records[i], records[i + 1]) for i in range(i1, i2)):
            assert s2[0] - s1[0] == s2[1] - s1[1] == i2 - i1  # every upstream offset between was copied
            assert i2 - i1 <= interval
        else:
            assert i2 == i1 + 1, f"{s1}..{s2} spans a discontinuity without ending the run"


@given(records=copied_records(), interval=st.integers(1, 12))
def test_invariant_after_every_update(records, interval):
    tracker = PartitionSyncTracker(interval)
    syncs: list[tuple[int, int]] = []
    for n, (up, down) in enumerate(records, start=1):
        syncs.extend(tracker.observe(up, down))
        assert_invariant(syncs, records[:n], interval)
        assert syncs[0] == records[0]
    syncs.extend(tracker.finish())
    assert_invariant(syncs, records, interval)
    assert syncs[-1] == records[-1], "the last record of the batch is a sync"


@given(records=copied_records(), interval=st.integers(1, 12), data=st.data())
def test_invariant_across_resumed_batches(records, interval, data):
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(records) - 1)), max_size=4)))
    batches = [records[a:b] for a, b in zip([0, *cuts], [*cuts, len(records)], strict=False) if records[a:b]]
    syncs: list[tuple[int, int]] = []
    previous = None
    for batch in batches:
        tracker = PartitionSyncTracker(interval, previous=previous)  # a fresh process per batch
        for up, down in batch:
            syncs.extend(tracker.observe(up, down))
        syncs.extend(tracker.finish())
        assert batch[0] in syncs and batch[-1] in syncs
        previous = tracker.last_observed
    assert_invariant(syncs, records, interval)


def runs_of(records: list[tuple[int, int]]) -> list[tuple[int, ...]]:
    """(first up, first down, count) of each stretch contiguous on both sides."""
    runs: list[list[int]] = []
    for i, record in enumerate(records):
        if runs and is_contiguous(records[i - 1], record):
            runs[-1][2] += 1
        else:
            runs.append([record[0], record[1], 1])
    return [tuple(r) for r in runs]


@given(records=copied_records(), interval=st.integers(1, 12), data=st.data())
def test_observe_run_emits_exactly_what_observe_emits(records, interval, data):
    """The fast path the copier uses per delivered chunk: same syncs, same state, split anywhere."""
    previous = data.draw(st.none() | st.just((records[0][0] - 1, records[0][1] - 1)).filter(lambda p: min(p) >= 0))
    slow, fast = PartitionSyncTracker(interval, previous), PartitionSyncTracker(interval, previous)
    expected = [s for batch in feed(slow, records) for s in batch]
    got: list[tuple[int, int]] = []
    for up, down, count in runs_of(records):
        cuts = sorted(data.draw(st.sets(st.integers(1, max(1, count - 1)), max_size=3))) if count > 1 else []
        for a, b in zip([0, *cuts], [*cuts, count], strict=False):  # a run may arrive in several chunks
            got.extend(fast.observe_run(up + a, down + a, b - a))
    assert got == expected
    assert all(isinstance(s, SyncPoint) for s in got)
    assert (fast.last_observed, fast.last_emitted) == (slow.last_observed, slow.last_emitted)
    assert fast.finish() == slow.finish()


@pytest.mark.parametrize("count", [0, -1, True, 1.5])
def test_observe_run_refuses_bad_counts(count):
    with pytest.raises(ValueError, match="count"):
        PartitionSyncTracker(3).observe_run(0, 0, count)


def test_observe_run_checks_offsets_keep_increasing():
    tracker = PartitionSyncTracker(3)
    tracker.observe_run(10, 10, 5)
    with pytest.raises(ValueError, match="strictly increase"):
        tracker.observe_run(14, 20, 2)
