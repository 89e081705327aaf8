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
from kafka_ferry.core.batches.batch_window import STOP_CAUGHT_UP, STOP_DEADLINE, STOP_LIMIT, batch_stop_reason
from kafka_ferry.core.common.dates import iso_utc
from kafka_ferry.core.common.state_records import parse_partition_key, partition_key
from kafka_ferry.state.progress import read_progress
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
    stopped_at_deadline: bool = False  # the window's deadline ended the range (at a chunk boundary)
    throttled_s: float = 0.0  # seconds the copier waited on the rate limit
    # the share of the migration's rate limit the copier's task copied under (None: no limit on that measure)
    share_bytes_per_second: float | None = None
    share_records_per_second: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def measure_lag(plan: CopyPlan, source, store: MigrationStateStore) -> dict[str, int]:
    """Uncopied offsets per partition of the plan: source last stable offset minus stored next offset."""
    partitions = [parse_partition_key(k) for k in plan.lag_before]
    if not partitions:
        return {}
    ends = source.list_offsets(partitions, "latest", read_committed=True)
    starts = source.list_offsets(partitions, "earliest")
    progress = read_progress(store)
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
        partitions.append({**r, "lag_before": plan.lag_before.get(key), "lag_after": lag_after.get(key),
                           "stop_reason": partition_stop_reason(plan, r)})
    report = {
        "migration": plan.migration,
        "batch_id": plan.batch_id,
        "status": status,
        # when the batch was planned (its lag_before is from then): a run's start, as the counted ETA measures it
        "planned_at_ms": plan.planned_at_ms,
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
        # why the batch stopped (core.batches.batch_window.STOP_REASONS), its window and rate limit
        "stop_reason": batch_stop_reason((p["stop_reason"] for p in partitions), plan.window_closed),
        "window": plan.window,
        "deadline_ms": plan.deadline_ms,
        # how long past its deadline the batch ran (0 for a run whose window had closed: it copied nothing)
        "overrun_s": (None if plan.deadline_ms is None else 0.0 if plan.window_closed
                      else round(max(0, finished_at_ms - plan.deadline_ms) / 1000, 3)),
        "window_budget_records": plan.window_budget_records,
        "max_bytes_per_second": plan.max_bytes_per_second,
        "max_records_per_second": plan.max_records_per_second,
        "throttled_s": round(sum(r.get("throttled_s", 0.0) for r in results), 3),
    }
    return report


def partition_stop_reason(plan: CopyPlan, result: Mapping[str, Any]) -> str:
    """``deadline`` when the window ended the range; ``limit`` when a cap did, or the plan itself held less than
    the source had (max_records_per_partition, the window's sizing); else ``caught_up``."""
    if result.get("stopped_at_deadline"):
        return STOP_DEADLINE
    if result.get("capped"):
        return STOP_LIMIT
    source_end = result["planned_start"] + plan.lag_before.get(partition_key(result["source_topic"],
                                                                             result["partition"]), 0)
    return STOP_LIMIT if result["next_upstream_offset"] < source_end else STOP_CAUGHT_UP


def report_lines(report: Mapping[str, Any]) -> list[str]:
    """Human-readable lines for the task log."""
    lines = [
        f"batch {report['batch_id']} of {report['migration']}: {report['status']} in {report['duration_s']} s, "
        f"{report['records_copied']} records / {report['bytes_copied']} bytes copied, "
        f"{report['syncs_written']} offset syncs, {report['records_resumed']} resumed from a previous attempt, "
        f"{report['records_skipped_loop']} skipped by the loop guard; "
        f"lag {report['lag_before_total']} -> {report['lag_after_total']} offsets",
    ]
    if report.get("stop_reason"):
        lines.append(_stop_line(report))
    for p in report["partitions"]:
        if p.get("stop_reason") == STOP_DEADLINE:
            lines.append(f"  {p['source_topic']}-{p['partition']} stopped at the deadline at offset "
                         f"{p['next_upstream_offset']}: left {p['planned_end'] - p['next_upstream_offset']} of "
                         f"this batch's offsets, lag {p['lag_after']} (the next run resumes there)")
    for p in report["partitions"]:
        lines.append(f"  {p['source_topic']}-{p['partition']} -> {p['destination_topic']}: "
                     f"[{p['start_offset']}, {p['next_upstream_offset']}) {p['records_copied']} records, "
                     f"{p['bytes_copied']} bytes, {p['syncs_written']} syncs, lag {p['lag_before']} -> "
                     f"{p['lag_after']}{' (capped)' if p['capped'] else ''}")
    for g in report["gaps"]:
        lines.append(f"  GAP {g['topic']}-{g['partition']} [{g['lost_start']}, {g['lost_end']}): "
                     f"{g['lost_count']} offsets lost to source retention before they were copied")
    return lines


def _stop_line(report: Mapping[str, Any]) -> str:
    """Why the batch stopped, its window and overrun, its rate limit and how long it waited on it."""
    reason = report["stop_reason"]
    parts = [f"stopped: {reason.replace('_', ' ')}"]
    if report.get("deadline_ms") is not None:
        overrun = report.get("overrun_s") or 0
        parts.append(f"window {report['window']} ended {iso_utc(report['deadline_ms'])}"
                     f"{f', overrun {overrun} s' if overrun else ', no overrun'}")
    limits = [f"{report[k]} {unit}/s" for k, unit in (("max_bytes_per_second", "bytes"),
                                                      ("max_records_per_second", "records")) if report.get(k)]
    if limits:
        parts.append(f"rate limit {' and '.join(limits)}, waited {report.get('throttled_s', 0)} s on it "
                     "(summed over partitions)")
    left = {f"{p['source_topic']}-{p['partition']}": p["lag_after"] for p in report["partitions"]
            if p.get("lag_after")}
    if reason != STOP_CAUGHT_UP and left:
        parts.append(f"left {report['lag_after_total']} offsets in {len(left)} partitions")
    return "; ".join(parts)


def write_report(report: Mapping[str, Any], path: str | Path | StoragePath) -> StoragePath:
    return write_text(as_path(path), json.dumps(report, indent=1, sort_keys=True))
