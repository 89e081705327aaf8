"""The promotion report: per group and partition the offsets and lag, per partition the reconciliation.

Why a file and the log: the report is what an operator signs the cutover off with; the JSON is kept in
the work dir next to the offset map, and every row is logged in the task log too.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from kafka_ferry.core.common.state_records import MIGRATION_KEY, STEP_PREFIX, TRANSLATION_PREFIX, under
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.storage.workdir import StoragePath, as_path, write_text

log = logging.getLogger(__name__)

GROUP_COLUMNS = ("group", "source_topic", "partition", "destination_topic", "upstream_offset", "downstream_offset",
                 "upstream_lag", "downstream_lag", "method", "flagged")


def build_report(spec: MigrationSpec, state: dict[str, dict], timings: dict, reconciliation: dict | None,
                 duration_s: float, timestamps: dict[str, dict] | None = None,
                 decode_marks: dict[str, dict] | None = None) -> dict:
    """``timestamps``: the mirrors' timestamp plans by source topic, with their status (copying/switched).
    ``decode_marks``: the decode check's per-partition totals (state kind ``decode-check``), summed per topic."""
    rows = []
    for value in under(state, TRANSLATION_PREFIX).values():
        rows += [{c: d.get(c) for c in GROUP_COLUMNS} for d in value["decisions"]]
    steps = ordered_steps(under(state, STEP_PREFIX))
    if reconciliation is None and "reconcile" in steps:
        reconciliation = steps["reconcile"].get("summary")
    return {"migration": spec.name, "generated_at_ms": int(time.time() * 1000),
            "status": state.get(MIGRATION_KEY, {}).get("status", "in-progress"),
            "duration_s": round(duration_s, 3), "total_s": steps_total_s(steps), "steps": steps, "this_run": timings,
            "groups": rows, "reconciliation": reconciliation,
            "timestamps": {topic: {**{k: v for k, v in plan.items() if k != "written_at_ms"},
                                   "status": timestamp_status(plan)}
                           for topic, plan in sorted((timestamps or {}).items())},
            "decode_totals": decode_totals(decode_marks or {})}


def ordered_steps(steps: dict[str, dict]) -> dict[str, dict]:
    """The promotion's steps in the order they ran (their finish times), not by name: the DAG runs each in its
    own task, so a person reading the page follows the cutover as it happened."""
    return dict(sorted(steps.items(), key=lambda kv: (kv[1].get("finished_at_ms") or kv[1].get("written_at_ms")
                                                      or 0, kv[0])))


def steps_total_s(steps: dict[str, dict]) -> float | None:
    """Seconds from the first step's start to the last step's finish: the whole promotion, over every task that
    ran a step (``duration_s`` is the one task that wrote this report)."""
    spans = [(s["finished_at_ms"] - 1000 * float(s.get("duration_s") or 0), s["finished_at_ms"])
             for s in steps.values() if s.get("finished_at_ms")]
    if not spans:
        return None
    return round((max(end for _, end in spans) - min(start for start, _ in spans)) / 1000, 3)


def timestamp_status(plan: dict) -> str | None:
    """``unchanged`` for a mirror whose promotion had no timestamp config to set (``switched`` only when it did)."""
    if plan.get("status") == "switched" and not plan.get("at_promotion"):
        return "unchanged"
    return plan.get("status")


def decode_totals(marks: dict[str, dict]) -> dict[str, dict[str, int]]:
    """Every record the decode check read on the destination since the migration began, per destination topic."""
    totals: dict[str, dict[str, int]] = {}
    for mark in marks.values():
        topic = totals.setdefault(mark["destination_topic"], {"records": 0, "decoded": 0, "plain": 0, "failed": 0})
        for k in topic:
            topic[k] += int(mark.get(k, 0))
    return dict(sorted(totals.items()))


def write_report(report: dict, work_dir: str | Path | StoragePath, logged: bool = True) -> StoragePath:
    """``promotion-report.json`` in ``work_dir``; ``logged``: also its summary in the task log (False when the
    same report is written again with one more section: the log has it already). One line (``jq .`` shows it
    indented): ``json`` encodes in C only without ``indent``, and the indented report of 2,000 partitions and 200
    groups took the cutover half a second to write."""
    path = write_text(as_path(work_dir) / "promotion-report.json", json.dumps(report, default=str))
    if logged:
        log_report(report)
    return path


LOGGED_ROWS = 20  # rows of each kind the task log shows; the report file beside it has every one


def log_report(report: dict) -> None:
    """The report in the task log: what a person reads first, bounded. At 2,000 partitions and 200 groups one
    line a row was 6,000 lines (and a second and a half of the promotion); the JSON report has every row, so
    the log says how many there are and shows the worst first: the groups with the largest lag, the mismatches."""
    log.info("promotion report %s: status %s", report["migration"], report["status"])
    rows = report["groups"]
    worst = sorted(rows, key=lambda r: -max(r.get("upstream_lag") or 0, r.get("downstream_lag") or 0))
    for row in worst[:LOGGED_ROWS]:
        log.info("  group %s %s-%s@%s -> %s-%s@%s lag %s/%s [%s]", row["group"], row["source_topic"],
                 row["partition"], row["upstream_offset"], row["destination_topic"], row["partition"],
                 row["downstream_offset"], row["upstream_lag"], row["downstream_lag"], row["method"])
    if len(rows) > LOGGED_ROWS:
        log.info("  ... %d more group partition(s), the largest lags above; every row in promotion-report.json",
                 len(rows) - LOGGED_ROWS)
    plans = list(report.get("timestamps", {}).items())
    for topic, plan in plans[:LOGGED_ROWS]:
        log.info("  timestamps %s -> %s: %s, from promotion on %s", topic, plan["destination_topic"], plan["status"],
                 plan.get("at_promotion") or "as while copying (unchanged)")
    if len(plans) > LOGGED_ROWS:
        log.info("  ... %d more topic(s)' timestamps in promotion-report.json", len(plans) - LOGGED_ROWS)
    rec = report.get("reconciliation") or {}
    parts = rec.get("partitions", [])
    if parts:
        log.info("  reconcile: %d partition(s), %d ok, %d record(s) checked", len(parts),
                 sum(1 for p in parts if p["matches"]), sum(p["source_count"] for p in parts))
    for p in [p for p in parts if not p["matches"]][:LOGGED_ROWS]:
        log.info("  reconcile %s-%s: MISMATCH (%s vs %s records)", p["source_topic"], p["partition"],
                 p["source_count"], p["destination_count"])
    if rec.get("mismatched"):
        log.warning("  reconciliation mismatches: %s", ", ".join(rec["mismatched"]))
