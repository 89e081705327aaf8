"""Exact and MM2 translation: literal cases per method, then whole copied partitions as properties."""

from __future__ import annotations

from bisect import bisect_left

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.offsets.offset_sync_policy import PartitionSyncTracker
from kafka_ferry.core.offsets.offset_translation import (
    PartitionOffsetMap,
    SyncConflictError,
    Translation,
    TranslationMethod,
    normalize_syncs,
    translate_exact,
    translate_mm2,
)

# Upstream 100..109 copied to 0..9, a compacted hole 110..119, upstream 120..124 copied to 10..14,
# then transaction markers up to the copied end 127. Syncs as the tracker emits them with interval 4.
SYNCS = [(100, 0), (104, 4), (108, 8), (109, 9), (120, 10), (124, 14)]
COPIED_END = 127


def test_literal_syncs_are_what_the_tracker_emits():
    records = [(100 + i, i) for i in range(10)] + [(120 + i, 10 + i) for i in range(5)]
    tracker = PartitionSyncTracker(4)
    emitted = [s for up, down in records for s in tracker.observe(up, down)] + tracker.finish()
    assert emitted == SYNCS


class TestExactCases:
    @pytest.mark.parametrize(
        ("upstream", "downstream", "method"),
        [
            (100, 0, TranslationMethod.EXACT_RUN),
            (101, 1, TranslationMethod.EXACT_RUN),
            (107, 7, TranslationMethod.EXACT_RUN),
            (109, 9, TranslationMethod.EXACT_RUN),
            (110, 10, TranslationMethod.HOLE_NEXT_RECORD),
            (119, 10, TranslationMethod.HOLE_NEXT_RECORD),
            (120, 10, TranslationMethod.EXACT_RUN),
            (123, 13, TranslationMethod.EXACT_RUN),
            (124, 14, TranslationMethod.EXACT_RUN),
            (125, 15, TranslationMethod.AT_COPIED_END),
            (127, 15, TranslationMethod.AT_COPIED_END),
            (128, 15, TranslationMethod.AHEAD_OF_COPY),
            (10**9, 15, TranslationMethod.AHEAD_OF_COPY),
        ],
    )
    def test_methods(self, upstream, downstream, method):
        result = translate_exact(SYNCS, upstream, COPIED_END)
        assert (result.downstream_offset, result.method) == (downstream, method)
        assert result.upstream_offset == upstream
        assert result.reason

    @pytest.mark.parametrize("upstream", [0, 99])
    def test_before_first_sync(self, upstream):
        result = translate_exact(SYNCS, upstream, COPIED_END)
        assert result == Translation(upstream, None, TranslationMethod.BEFORE_FIRST_SYNC, result.reason)
        assert "(100, 0)" in result.reason

    def test_no_syncs(self):
        result = translate_exact([], 5, 10)
        assert (result.downstream_offset, result.method, result.reason) == (
            None,
            TranslationMethod.BEFORE_FIRST_SYNC,
            "no offset syncs for this partition",
        )

    def test_reason_names_the_syncs_used(self):
        assert "(109, 9)" in translate_exact(SYNCS, 115, COPIED_END).reason
        assert "(120, 10)" in translate_exact(SYNCS, 115, COPIED_END).reason
        assert "clamped" in translate_exact(SYNCS, 200, COPIED_END).reason

    def test_order_and_duplicates_do_not_matter(self):
        shuffled = list(reversed(SYNCS)) + SYNCS[:3]
        for upstream in range(95, 130):
            assert translate_exact(shuffled, upstream, COPIED_END) == translate_exact(SYNCS, upstream, COPIED_END)

    def test_copied_end_must_be_above_last_sync(self):
        with pytest.raises(ValueError, match="copied_upstream_end 124"):
            translate_exact(SYNCS, 100, 124)

    def test_equal_spans_across_a_hole_reach_the_same_next_record(self):
        # (10, 100) ends a run, (12, 102) starts the next: upstream 11 and downstream 101 hold nothing copied.
        result = translate_exact([(10, 100), (12, 102)], 11, 13)
        assert result.downstream_offset == 101  # a consumer there next reads the record at 102


class TestMm2Cases:
    @pytest.mark.parametrize(
        ("upstream", "downstream"),
        [
            (99, None),
            (100, 0),
            (101, 1),
            (103, 1),
            (104, 4),
            (109, 9),
            (110, 10),
            (119, 10),
            (120, 10),
            (121, 11),
            (500, 15),
        ],
    )
    def test_plus_one_rule(self, upstream, downstream):
        assert translate_mm2(SYNCS, upstream) == downstream

    def test_methods_and_reasons(self):
        offset_map = PartitionOffsetMap(SYNCS)
        assert offset_map.translate_mm2(104).method == TranslationMethod.MM2_SYNC
        result = offset_map.translate_mm2(106)
        assert (result.method, result.downstream_offset) == (TranslationMethod.MM2_PLUS_ONE, 5)
        assert "(104, 4)" in result.reason
        assert offset_map.translate_mm2(1).method == TranslationMethod.BEFORE_FIRST_SYNC

    def test_no_syncs(self):
        assert translate_mm2([], 0) is None


class TestValidation:
    def test_conflicting_downstream_for_same_upstream(self):
        with pytest.raises(SyncConflictError, match="upstream offset 5 has two syncs"):
            normalize_syncs([(5, 1), (5, 2)])

    def test_downstream_going_backwards(self):
        with pytest.raises(SyncConflictError, match="backwards"):
            PartitionOffsetMap([(1, 10), (2, 5)])

    @pytest.mark.parametrize("bad", [(-1, 0), (0, -1), (1.0, 2), (True, 2)])
    def test_bad_sync(self, bad):
        with pytest.raises(ValueError, match="must be an int >= 0"):
            normalize_syncs([bad])

    def test_bad_offsets(self):
        with pytest.raises(ValueError, match="upstream_offset"):
            translate_exact(SYNCS, -1, COPIED_END)
        with pytest.raises(ValueError, match="copied_upstream_end"):
            translate_exact(SYNCS, 100, -5)

    def test_translation_rejects_inconsistent_values(self):
        with pytest.raises(ValueError, match="unknown"):
            Translation(1, 1, "guess", "")  # type: ignore[arg-type]  # refused at run time too
        with pytest.raises(ValueError):
            Translation(1, None, TranslationMethod.EXACT_RUN, "")
        with pytest.raises(ValueError):
            Translation(1, 5, TranslationMethod.BEFORE_FIRST_SYNC, "")

    def test_map_is_normalized_once(self):
        offset_map = PartitionOffsetMap([(5, 5), (1, 1), (5, 5)])
        assert offset_map.syncs == ((1, 1), (5, 5))
        assert len(offset_map) == 2


# ---- properties over whole copied partitions -------------------------------------------------------


@st.composite
def copied_partition(draw, downstream_holes: bool):
    """Source offsets with random holes (compaction, transaction markers) copied in order downstream.

    Returns (records, copied_upstream_end): the copy read everything below copied_upstream_end, whose
    last offsets may be markers (nothing to copy).
    """
    up, down = draw(st.integers(0, 10**5)), draw(st.integers(0, 10**5))
    down_gaps = st.sampled_from([1, 1, 1, 2, 3]) if downstream_holes else st.just(1)
    records: list[tuple[int, int]] = []
    for run_length, up_gap, down_gap in draw(
        st.lists(st.tuples(st.integers(1, 30), st.integers(1, 8), down_gaps), min_size=1, max_size=8)
    ):
        records.extend((up + i, down + i) for i in range(run_length))
        up, down = records[-1][0] + up_gap, records[-1][1] + down_gap
    return records, records[-1][0] + 1 + draw(st.integers(0, 4))


def expected_downstream(records: list[tuple[int, int]], upstream: int) -> int:
    """Ground truth: the first copied record at or after U, else one past the last copied record."""
    i = bisect_left([r[0] for r in records], upstream)
    return records[i][1] if i < len(records) else records[-1][1] + 1


def run_batches(records, cut_points, interval, fresh_tracker_per_batch):
    """Copy in batches; yield (records so far, syncs so far, copied end) after each batch."""
    bounds = sorted({0, *cut_points, len(records)})
    tracker = PartitionSyncTracker(interval)
    syncs: list[tuple[int, int]] = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        if fresh_tracker_per_batch:
            tracker = PartitionSyncTracker(interval, previous=tracker.last_observed)
        for up, down in records[start:end]:
            syncs.extend(tracker.observe(up, down))
        syncs.extend(tracker.finish())
        # The copy of this batch stopped somewhere after its last record and at or before the next one.
        batch_end = records[end][0] if end < len(records) else None
        yield records[:end], list(syncs), batch_end


def assert_translations(copied, syncs, copied_end, interval):
    offset_map = PartitionOffsetMap(syncs)
    first_up, last = copied[0][0], copied[-1]
    copied_downs = [r[1] for r in copied]
    downstream_contiguous = copied_downs == list(range(copied_downs[0], copied_downs[-1] + 1))
    if first_up > 0:
        assert offset_map.translate_exact(first_up - 1, copied_end).method == TranslationMethod.BEFORE_FIRST_SYNC
    for upstream in range(first_up, copied_end + 1):
        exact = offset_map.translate_exact(upstream, copied_end)
        want = expected_downstream(copied, upstream)
        # Zero loss and zero duplicates: nothing copied lies in [exact, want), so the consumer's next record
        # is the right one. Literally equal unless a downstream hole is as wide as the upstream one.
        assert exact.downstream_offset is not None and exact.downstream_offset <= want, (upstream, exact)
        assert bisect_left(copied_downs, exact.downstream_offset) == bisect_left(copied_downs, want), (upstream, exact)
        if downstream_contiguous:
            assert exact.downstream_offset == want, (upstream, exact)
        mm2 = offset_map.translate_mm2(upstream).downstream_offset
        assert mm2 is not None and mm2 <= want, f"MM2 would skip records at U={upstream}"
        redelivered = bisect_left(copied_downs, want) - bisect_left(copied_downs, mm2)
        assert redelivered <= interval
        assert redelivered <= max(0, interval - 2)  # at most interval records apart, minus both ends
    ahead = offset_map.translate_exact(copied_end + 1, copied_end)
    assert (ahead.downstream_offset, ahead.method) == (last[1] + 1, TranslationMethod.AHEAD_OF_COPY)


@given(copied_partition(downstream_holes=False), st.integers(1, 10))
def test_exact_translation_of_a_single_batch(partition, interval):
    records, copied_end = partition
    ((copied, syncs, _),) = run_batches(records, [], interval, fresh_tracker_per_batch=False)
    assert_translations(copied, syncs, copied_end, interval)


@given(copied_partition(downstream_holes=True), st.integers(1, 10), st.data())
def test_exact_translation_across_batches(partition, interval, data):
    records, copied_end = partition
    cuts = data.draw(st.sets(st.integers(1, len(records)), max_size=5))
    fresh = data.draw(st.booleans())
    for copied, syncs, next_record_up in run_batches(records, cuts, interval, fresh):
        if next_record_up is None:
            batch_copied_end = copied_end
        else:  # the batch may have read trailing markers up to the next record
            batch_copied_end = data.draw(st.integers(copied[-1][0] + 1, next_record_up))
        assert_translations(copied, syncs, batch_copied_end, interval)
