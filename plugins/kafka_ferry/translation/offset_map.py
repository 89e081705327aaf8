"""The offset map as runs, for consumers that keep their offsets outside Kafka (Spark, Flink jobs).

Why runs and not raw syncs: a run says "upstream offsets ``first..last`` were copied contiguously to
``down_first..``", which a person or job applies without knowing the sync-log invariants:

* U inside a run:      down_first + (U - up_first)
* U before a run (in a hole, or before the first run): that run's down_first
* U after the last run (up to the copied end):         next_downstream_offset

``translate_with_runs`` implements exactly that and is tested against ``translate_exact``.
"""

from __future__ import annotations

import csv
import io
import json
import time
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from kafka_ferry.core.offsets.offset_decisions import PartitionCopy
from kafka_ferry.core.offsets.offset_sync_policy import SyncPoint
from kafka_ferry.core.offsets.spark_checkpoint import OFFSET_MAP_SCHEMA_VERSION
from kafka_ferry.storage.workdir import StoragePath, as_path, write_text

RULE = ("U inside a run: downstream_first + (U - upstream_first); U before a run (hole or before the first run): "
        "that run's downstream_first; U after the last run: next_downstream_offset. Offsets above "
        "copied_upstream_end are not copied yet.")
# The document's version (docs/promotion.md, "The offset map"): raised when a field changes meaning or goes away;
# a field added keeps it. Readers refuse a version they do not know (core.offsets.spark_checkpoint.parse_offset_map).
SCHEMA_VERSION = OFFSET_MAP_SCHEMA_VERSION
CSV_COLUMNS = ("source_topic", "partition", "destination_topic", "upstream_first", "upstream_last",
               "downstream_first", "copied_upstream_end", "next_downstream_offset")


class Run(NamedTuple):
    upstream_first: int
    upstream_last: int
    downstream_first: int


def runs_from_syncs(syncs: Sequence[SyncPoint]) -> list[Run]:
    """Merge consecutive syncs with equal upstream and downstream spans (invariant B: a run)."""
    runs: list[Run] = []
    for sync in syncs:
        if runs:
            last = runs[-1]
            if sync.upstream_offset - last.upstream_first == sync.downstream_offset - last.downstream_first:
                runs[-1] = Run(last.upstream_first, sync.upstream_offset, last.downstream_first)
                continue
        runs.append(Run(sync.upstream_offset, sync.upstream_offset, sync.downstream_offset))
    return runs


def translate_with_runs(runs: Sequence[Run], next_downstream_offset: int, upstream_offset: int) -> int:
    """Apply ``RULE``: the downstream offset a consumer at ``upstream_offset`` resumes from."""
    i = bisect_right([r.upstream_first for r in runs], upstream_offset) - 1
    if i >= 0 and upstream_offset <= runs[i].upstream_last:
        return runs[i].downstream_first + (upstream_offset - runs[i].upstream_first)
    if i + 1 < len(runs):
        return runs[i + 1].downstream_first
    return next_downstream_offset


def offset_map_document(migration: str, copies: Iterable[PartitionCopy]) -> dict:
    partitions = []
    for copy in sorted(copies, key=lambda c: c.key):
        partitions.append({
            "source_topic": copy.source_topic,
            "partition": copy.partition,
            "destination_topic": copy.destination_topic,
            "copied_upstream_end": copy.copied_upstream_end,
            "next_downstream_offset": copy.next_downstream_offset,
            "runs": [list(r) for r in runs_from_syncs(copy.offset_map.syncs)],
        })
    return {"schema_version": SCHEMA_VERSION, "migration": migration, "generated_at_ms": int(time.time() * 1000),
            "rule": RULE, "run_fields": list(Run._fields), "partitions": partitions}


def write_offset_map(migration: str, copies: Iterable[PartitionCopy], out_dir: str | Path | StoragePath
                     ) -> tuple[StoragePath, StoragePath]:
    """Write ``offset-map.json`` and ``offset-map.csv`` (one row per run), each whole; returns both paths."""
    out = as_path(out_dir)
    document = offset_map_document(migration, copies)
    json_path, csv_path = out / "offset-map.json", out / "offset-map.csv"
    write_text(json_path, json.dumps(document, indent=1))
    rows = io.StringIO(newline="")
    writer = csv.writer(rows)
    writer.writerow(CSV_COLUMNS)
    for p in document["partitions"]:
        for run in p["runs"] or [[None, None, None]]:
            writer.writerow([p["source_topic"], p["partition"], p["destination_topic"], *run,
                             p["copied_upstream_end"], p["next_downstream_offset"]])
    write_text(csv_path, rows.getvalue())
    return json_path, csv_path
