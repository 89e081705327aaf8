"""Translation decisions beyond core's translate_exact: crash syncs, empty partitions, below the first sync."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.offsets.offset_decisions import (
    BELOW_LOG_START,
    FIRST_COPIED_RECORD,
    NOT_COPIED,
    NOTHING_COPIED,
    decide,
    partition_copy,
    translate_groups,
)
from kafka_ferry.core.offsets.offset_sync_policy import PartitionSyncTracker
from kafka_ferry.core.offsets.offset_translation import TranslationMethod

# Upstream 100..109 -> 0..9, hole 110..119, 120..124 -> 10..14, copied end 127 (tracker interval 4).
SYNCS = [(100, 0), (104, 4), (108, 8), (109, 9), (120, 10), (124, 14)]


def progress(end=127, last=(124, 14)):
    return PartitionProgress("t", 0, "dst.t", end, *(last or (None, None)))


def test_syncs_of_a_batch_without_progress_are_ignored():
    crashed = [(130, 15), (131, 16)]  # a later batch that died before writing progress
    copy = partition_copy(progress(), SYNCS + crashed, source_log_start=100, downstream_end=17)
    assert copy.offset_map.syncs[-1] == (124, 14)
    assert decide("g", 127, "", copy).downstream_offset == 15
    assert decide("g", 131, "", copy).method == TranslationMethod.AHEAD_OF_COPY


def test_progress_last_record_closes_the_log_when_its_sync_is_missing():
    copy = partition_copy(progress(), SYNCS[:-1], source_log_start=100)
    d = decide("g", 123, "", copy)
    assert (d.downstream_offset, d.method) == (13, TranslationMethod.EXACT_RUN)
    assert decide("g", 125, "", copy).method == TranslationMethod.AT_COPIED_END


def test_below_the_first_sync():
    copy = partition_copy(progress(), SYNCS, source_log_start=90)
    d = decide("g", 95, "m", copy)
    assert (d.downstream_offset, d.method, d.flagged) == (0, FIRST_COPIED_RECORD, False)
    d = decide("g", 80, "m", copy)
    assert (d.downstream_offset, d.method, d.flagged) == (0, BELOW_LOG_START, True)


def test_partition_with_nothing_copied_resumes_at_the_destination_start():
    copy = partition_copy(progress(end=40, last=None), [], source_log_start=0, downstream_start=3, downstream_end=3)
    assert (decide("g", 12, "", copy).downstream_offset, decide("g", 12, "", copy).method) == (3, NOTHING_COPIED)
    assert decide("g", 41, "", copy).method == TranslationMethod.AHEAD_OF_COPY


def test_untouched_partition_and_unmigrated_topic():
    copies = {("t", 0): partition_copy(progress(), SYNCS, 100)}
    commits = {"g": {("t", 0): (112, "meta"), ("t", 1): (5, ""), ("other", 0): (1, "")}}
    decisions = translate_groups(commits, copies, topics=["t"])
    assert [(d.partition, d.downstream_offset, d.method) for d in decisions] == [
        (0, 10, TranslationMethod.HOLE_NEXT_RECORD), (1, None, NOT_COPIED)]
    assert decisions[0].metadata == "meta" and decisions[0].upstream_lag == 15
    assert decisions[1].flagged


@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), min_size=1, max_size=60), st.integers(1, 6),
       st.integers(0, 3))
def test_any_copy_translates_to_the_next_unconsumed_record(steps, interval, batches):
    """Simulate a copy (upstream gaps, downstream markers, several batches) and check every U."""
    up, down, copied = -1, -1, []
    for du, dd in steps:
        up, down = up + du, down + dd
        copied.append((up, down))
    syncs, tracker, cut = [], PartitionSyncTracker(interval), max(1, len(copied) // (batches + 1))
    for i, (u, d) in enumerate(copied):
        syncs += tracker.observe(u, d)
        if (i + 1) % cut == 0:
            syncs += tracker.finish()
    syncs += tracker.finish()
    end = copied[-1][0] + 2
    copy = partition_copy(PartitionProgress("t", 0, "t", end, *copied[-1]), syncs, source_log_start=0)
    for upstream in range(end + 1):
        translated = decide("g", upstream, "", copy).downstream_offset
        assert translated is not None, upstream
        expected = [u for u, _ in copied if u >= upstream]
        got = [u for u, d in copied if d >= translated]
        assert got == expected, (upstream, translated)
