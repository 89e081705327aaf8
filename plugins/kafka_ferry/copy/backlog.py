"""Backlog, rate and ETA of a migration, measured after each catch-up batch and estimated before the first.

After a batch (``record_backlog``, the copy report task): the batch's backlog before and after (its report's
lag totals, in offsets), what it copied and how long it took become one "backlog" state record with the ETAs of
``core.batches.backlog_eta``, and the run's report gets the same as its ``backlog`` section (with the history the run
page charts). Bytes of backlog are the offsets left times the bytes per record the copy measured: an estimate.

Before any batch (``estimate_before_copy``, pre-flight and the dry run, one function so both say the same):
the backlog is the next batch's plan (source end minus stored or log-start offsets, ``plan_copy(dry_run=True)``),
the bytes per record the history's or, with none yet, the mean size of a bounded sample of the newest source
records (confluent-kafka's AdminClient has no DescribeLogDirs, so log dir sizes are not available).

The ETA counted in batches (first of the ETAs) takes each partition's lag, the spec's
``copy.max_records_per_partition`` and the batches' measured fixed cost (``core.batches.backlog_eta.batch_eta``).
The rate limit and the window come from the spec's ``copy`` section (``copy.max_bytes_per_second``,
``copy.max_records_per_second``, ``copy.window``); a spec without them gives the ETA at the measured rate only.
The window's length is ``core.batches.batch_window.window_length_s`` over the window the spec's validator parsed
(``parse_window``, the one parser), so a window the spec would refuse never reaches the ETA.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.copy.planning import plan_copy
from kafka_ferry.core.batches.backlog_eta import RunPoint, estimate
from kafka_ferry.core.batches.batch_planning import RetentionGapError
from kafka_ferry.core.batches.batch_window import parse_window, schedule_cycle_s, window_length_s
from kafka_ferry.core.common.state_records import parse_partition_key
from kafka_ferry.core.schemas.serialized_fields import FieldsUndecided
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.kafka.reads import read_ranges
from kafka_ferry.state.backlog import read_backlog, run_points, save_backlog
from kafka_ferry.state.store import MigrationStateStore

log = logging.getLogger(__name__)

HISTORY_POINTS = 60  # runs a report's backlog section carries for its chart
SAMPLE_PARTITIONS = 8  # a bounded sample: the newest records of the partitions with the most left
SAMPLE_PER_PARTITION = 25
SAMPLE_TIMEOUT_S = 20.0


def spec_limits(spec: MigrationSpec) -> dict[str, Any]:
    """The rate limits, window length and window cycle (one window a day on a daily schedule) the ETAs use (None
    where the spec has none)."""
    copy = spec.copy_settings
    window_s = None if copy.window is None else window_length_s(parse_window(copy.window), spec.schedule)
    return {"max_bytes_per_s": copy.max_bytes_per_second, "max_records_per_s": copy.max_records_per_second,
            "window_s": window_s, "cycle_s": None if window_s is None else schedule_cycle_s(spec.schedule)}


def offsets_progressed(report: Mapping[str, Any]) -> int:
    """Offsets the batch moved its partitions' stored positions by: from where the plan started each range (the
    stored next offset or the log start, as the plan's ``lag_before`` counts from) to where the copy stopped,
    whatever it did for them (copied, found already on the destination, skipped by the loop guard, markers)."""
    return sum(max(0, int(p["next_upstream_offset"]) - int(p["planned_start"])) for p in report.get("partitions", ()))


def _point(report: Mapping[str, Any]) -> RunPoint:
    return RunPoint(str(report["batch_id"]), int(report.get("finished_at_ms") or 0),
                    float(report.get("duration_s") or 0), int(report.get("records_copied") or 0),
                    int(report.get("bytes_copied") or 0), int(report.get("lag_before_total") or 0),
                    int(report.get("lag_after_total") or 0), report.get("stop_reason"), offsets_progressed(report),
                    report.get("planned_at_ms") or None)


def record_backlog(spec: MigrationSpec, report: Mapping[str, Any], store: MigrationStateStore) -> dict[str, Any]:
    """Keep the batch's backlog record (kind "backlog") and return the report's ``backlog`` section.

    The ETA is taken as this batch's window ends: with windows once per known cycle, the next one opens about a
    cycle after this one started, so the producers' records until then count before its first window."""
    history = [r for r in read_backlog(store) if r.get("batch_id") != report["batch_id"]]
    this = _point(report)
    points = [*run_points(history), this]
    limits = spec_limits(spec)
    until_next = None if limits["cycle_s"] is None else max(0.0, limits["cycle_s"] - this.duration_s)
    result = estimate(this.backlog_after, points, until_next_window_s=until_next,
                      partition_lags=[int(p.get("lag_after") or 0) for p in report.get("partitions", ())],
                      cap_per_partition=spec.copy_settings.max_records_per_partition, **limits)
    per_record = result.bytes_per_record
    record = {
        "batch_id": this.batch_id, "finished_at_ms": this.finished_at_ms, "duration_s": this.duration_s,
        "records_copied": this.records_copied, "bytes_copied": this.bytes_copied,
        "backlog_before": this.backlog_before, "backlog_after": this.backlog_after,
        # what the producers' rate subtracts (core.batches.backlog_eta: offsets, not records)
        "offsets_progressed": this.offsets_progressed,
        # the run's start as the counted ETA measures a batch's fixed cost (RunPoint.run_s: an engine's start too)
        "planned_at_ms": this.planned_at_ms,
        # why the batch stopped: only a busy one (deadline, limit) measures the copy rate (core.batches.copy_rate)
        "stop_reason": this.stop_reason,
        # the part this batch copied is measured; only the rest is estimated
        "backlog_bytes_before": None if per_record is None else
        this.bytes_copied + int(round(max(0, this.backlog_before - this.records_copied) * per_record)),
        "backlog_bytes_after": result.backlog_bytes, "bytes_estimated": True,
        "bytes_per_record": per_record, "copy_records_per_s": result.copy_records_per_s,
        "copy_bytes_per_s": result.copy_bytes_per_s, "inflow_records_per_s": result.inflow_records_per_s,
        "rate_reason": result.rate_reason, "etas": result.as_dict()["etas"], "sentence": result.sentence,
        "limits": limits,
    }
    save_backlog(store, record)
    chart = [{k: r.get(k) for k in ("batch_id", "finished_at_ms", "backlog_before", "backlog_after",
                                    "backlog_bytes_after")} for r in [*history, record]][-HISTORY_POINTS:]
    return {**record, "history": chart}


def sample_bytes_per_record(source: KafkaCluster, lag: Mapping[str, int],
                            ends: Mapping[tuple[str, int], int]) -> tuple[float | None, int]:
    """(mean key + value bytes, records read) of the newest uncopied records of a few partitions; (None, 0) when
    none could be read in ``SAMPLE_TIMEOUT_S``. Bounded: at most SAMPLE_PARTITIONS x SAMPLE_PER_PARTITION."""
    chosen = sorted(((n, parse_partition_key(k)) for k, n in lag.items() if n > 0), reverse=True)[:SAMPLE_PARTITIONS]
    ranges = {tp: (max(0, ends[tp] - min(n, SAMPLE_PER_PARTITION)), ends[tp]) for n, tp in chosen if tp in ends}
    sizes = []
    try:
        for msg in read_ranges(source, ranges, timeout_s=SAMPLE_TIMEOUT_S):
            sizes.append(len(msg.key() or b"") + len(msg.value() or b""))
    except KafkaClusterError as exc:  # an estimate, not a gate: without it the ETA says "no bytes measured"
        log.warning("backlog estimate: sampling record sizes failed (%s)", exc)
    return (sum(sizes) / len(sizes) if sizes else None), len(sizes)


def estimate_before_copy(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                         store: MigrationStateStore, plan: CopyPlan | None = None) -> dict[str, Any]:
    """The backlog and ETA before the next batch, from sizes alone; changes nothing (pre-flight, dry run).

    ``plan``: the next batch's plan when the caller has made it (the dry run's planning task), else made here as
    a dry run makes it. The pre-flight is no place to fail on what the plan task reports anyway: a plan or a
    sample that cannot be made gives "no estimate" with its reason (logged), never a failed pre-flight."""
    try:
        plan = plan or plan_copy(spec, source, destination, store, dry_run=True)
    except (RetentionGapError, KafkaClusterError, FieldsUndecided) as exc:
        log.warning("no backlog estimate: %s", exc)
        return {"backlog_records": None, "backlog_bytes": None, "etas": [], "partitions": 0,
                "sentence": f"no estimate: {exc}"}
    backlog = sum(plan.lag_before.values())
    points = run_points(read_backlog(store))
    sampled, sample_size = None, 0
    if not any(p.records_copied for p in points):
        partitions = [parse_partition_key(k) for k in plan.lag_before]
        ends = source.list_offsets(partitions, "latest", read_committed=True) if partitions else {}
        sampled, sample_size = sample_bytes_per_record(source, plan.lag_before, ends)
    result = estimate(backlog, points, sampled_bytes_per_record=sampled, partition_lags=list(plan.lag_before.values()),
                      cap_per_partition=spec.copy_settings.max_records_per_partition, **spec_limits(spec))
    return {**result.as_dict(), "partitions": len(plan.lag_before), "batches_measured": len(points),
            "bytes_per_record_from": ("the batches copied so far" if any(p.records_copied for p in points) else
                                      f"a sample of {sample_size} source records" if sample_size else "nothing")}


def estimate_lines(est: Mapping[str, Any]) -> list[str]:
    """The estimate as log lines."""
    if est.get("backlog_records") is None:
        return [str(est["sentence"])]
    size = (f"~{est['backlog_bytes']:,} bytes (estimated from {est['bytes_per_record_from']})"
            if est.get("backlog_bytes") is not None else "bytes unknown (no record size measured)")
    return [f"backlog: {est['backlog_records']:,} offsets in {est['partitions']} partition(s), {size}",
            *(f"ETA {e['sentence']}" for e in est["etas"])]
