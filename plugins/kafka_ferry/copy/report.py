"""The batch report: records and bytes copied, lag before and after per partition, syncs, gaps, duration.

Built from the plan and the per-partition results the Spark tasks return; written as JSON next to the
plan, logged line by line by the report task and kept in the state topic (kind "batch").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.core.state_records import parse_partition_key, partition_key
from kafka_ferry.state.progress import read_progress as stored_progress
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.storage.workdir import StoragePath, as_path, write_text

TOTALS = ("records_copied", "bytes_copied", "records_resumed", "records_skipped_loop", "syncs_written")


@dataclass
class PartitionResult:
    """What one partition's copy did; the driver collects these (small, no record data)."""

    source_topic: str
    partition: int
    destination_topic: str
    planned_start: int
    planned_end: int
    start_offset: int
    next_upstream_offset: int
    records_copied: int = 0
    bytes_copied: int = 0
    records_resumed: int = 0
    records_skipped_loop: int = 0
    syncs_written: int = 0
    capped: bool = False
    duration_s: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def measure_lag(plan: CopyPlan, source, store: MigrationStateStore) -> dict[str, int]:
    """Uncopied offsets per partition of the plan: source last stable offset minus stored next offset."""
    partitions = [parse_partition_key(k) for k in plan.lag_before]
    if not partitions:
        return {}
    ends = source.list_offsets(partitions, "latest", read_committed=True)
    starts = source.list_offsets(partitions, "earliest")
    progress = stored_progress(store)
    lag = {}
    for tp in partitions:
        stored = progress[tp].next_upstream_offset if tp in progress else 0
        lag[partition_key(*tp)] = max(0, ends[tp] - max(starts[tp], stored))
    return lag


def build_report(plan: CopyPlan, results: Iterable[Mapping[str, Any]], lag_after: Mapping[str, int],
                 started_at_ms: int, finished_at_ms: int, status: str = "succeeded") -> dict[str, Any]:
    results = sorted(results, key=lambda r: (r["source_topic"], r["partition"]))
    partitions = []
    for r in results:
        key = partition_key(r["source_topic"], r["partition"])
        partitions.append({**r, "lag_before": plan.lag_before.get(key), "lag_after": lag_after.get(key)})
    report = {
        "migration": plan.migration,
        "batch_id": plan.batch_id,
        "status": status,
        "started_at_ms": started_at_ms,
        "finished_at_ms": finished_at_ms,
        "duration_s": round((finished_at_ms - started_at_ms) / 1000, 3),
        "partitions_planned": len(plan.tasks),
        "partitions_copied": sum(1 for r in results if r["records_copied"] or r["records_resumed"]),
        **{name: sum(r[name] for r in results) for name in TOTALS},
        "lag_before_total": sum(plan.lag_before.values()),
        "lag_after_total": sum(lag_after.values()),
        "lag_before": dict(plan.lag_before),
        "lag_after": dict(lag_after),
        "gaps": [{**asdict(g), "lost_count": g.lost_count} for g in plan.gaps],
        "partitions": partitions,
    }
    return report


def report_lines(report: Mapping[str, Any]) -> list[str]:
    """Human-readable lines for the task log."""
    lines = [
        f"batch {report['batch_id']} of {report['migration']}: {report['status']} in {report['duration_s']} s, "
        f"{report['records_copied']} records / {report['bytes_copied']} bytes copied, "
        f"{report['syncs_written']} offset syncs, {report['records_resumed']} resumed from a previous attempt, "
        f"{report['records_skipped_loop']} skipped by the loop guard; "
        f"lag {report['lag_before_total']} -> {report['lag_after_total']} offsets",
    ]
    for p in report["partitions"]:
        lines.append(f"  {p['source_topic']}-{p['partition']} -> {p['destination_topic']}: "
                     f"[{p['start_offset']}, {p['next_upstream_offset']}) {p['records_copied']} records, "
                     f"{p['bytes_copied']} bytes, {p['syncs_written']} syncs, lag {p['lag_before']} -> "
                     f"{p['lag_after']}{' (capped)' if p['capped'] else ''}")
    for g in report["gaps"]:
        lines.append(f"  GAP {g['topic']}-{g['partition']} [{g['lost_start']}, {g['lost_end']}): "
                     f"{g['lost_count']} offsets lost to source retention before they were copied")
    return lines


def write_report(report: Mapping[str, Any], path: str | Path | StoragePath) -> StoragePath:
    return write_text(as_path(path), json.dumps(report, indent=1, sort_keys=True))
