"""The exported offset map (runs) answers like the exact translation, and its files are what they say."""

from __future__ import annotations

import csv
import json

from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.offsets.offset_decisions import decide, partition_copy
from kafka_ferry.core.offsets.offset_sync_policy import PartitionSyncTracker
from kafka_ferry.translation.offset_map import Run, runs_from_syncs, translate_with_runs, write_offset_map

SYNCS = [(100, 0), (104, 4), (108, 8), (109, 9), (120, 10), (124, 14)]


def test_runs_merge_equal_spans():
    copy = partition_copy(PartitionProgress("t", 0, "d", 127, 124, 14), SYNCS)
    assert runs_from_syncs(copy.offset_map.syncs) == [Run(100, 109, 0), Run(120, 124, 10)]


def test_files(tmp_path):
    copy = partition_copy(PartitionProgress("t", 0, "d", 127, 124, 14), SYNCS)
    json_path, csv_path = write_offset_map("m", [copy], tmp_path)
    doc = json.loads(json_path.read_text())
    assert doc["partitions"][0]["runs"] == [[100, 109, 0], [120, 124, 10]]
    assert doc["partitions"][0]["next_downstream_offset"] == 15
    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["upstream_first"], r["upstream_last"], r["downstream_first"]) for r in rows] == [
        ("100", "109", "0"), ("120", "124", "10")]


@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), min_size=1, max_size=50), st.integers(1, 5))
def test_runs_translate_like_decide(steps, interval):
    up, down, tracker, syncs = -1, -1, PartitionSyncTracker(interval), []
    for du, dd in steps:
        up, down = up + du, down + dd
        syncs += tracker.observe(up, down)
    syncs += tracker.finish()
    copy = partition_copy(PartitionProgress("t", 0, "d", up + 3, up, down), syncs)
    runs = runs_from_syncs(copy.offset_map.syncs)
    for u in range(up + 4):
        assert translate_with_runs(runs, copy.next_downstream_offset, u) == decide("g", u, "", copy).downstream_offset
