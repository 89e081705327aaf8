"""Which metrics a batch, a promotion, a translation and a decode check send, named per migration (pure).

The Airflow edge (``airflow_native/metrics.py``) sends them through Airflow's own metrics (``Stats``: StatsD,
Datadog or OpenTelemetry, as ``[metrics]`` configures). Why the migration is in the name *and* a tag: plain StatsD
drops tags (only its InfluxDB form and Datadog carry them), so a dashboard on plain StatsD tells migrations apart by
name, while tag-aware backends group by the ``migration`` tag. Every name part comes from data (the migration's
name, a promotion step, a translation method): each is checked against StatsD's safe characters and the whole name
against Airflow's 250-character limit, so a hostile value cannot forge another metric.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kafka_ferry.core.common.failures import Retryable

PREFIX = "kafka_ferry"
MAX_NAME = 250  # Airflow's stat name limit (its metrics validator refuses longer names)
_PART = re.compile(r"[A-Za-z0-9_-]{1,80}")
_MIGRATION = re.compile(r"[a-z0-9][a-z0-9_.-]{0,79}")

Kind = Literal["incr", "gauge", "timing"]


class MetricNameError(Retryable, ValueError):
    """A value that cannot be a part of a metric name."""


@dataclass(frozen=True)
class Metric:
    """One call to Airflow's ``Stats``: ``incr`` (a count), ``gauge`` (a level) or ``timing`` (milliseconds)."""

    kind: Kind
    name: str
    value: float
    tags: tuple[tuple[str, str], ...]


def metric_name(migration: str, *parts: str) -> str:
    """``kafka_ferry.<migration>.<part>...``; each part from StatsD's safe characters (a part never holds a dot)."""
    if not _MIGRATION.fullmatch(migration or ""):
        raise MetricNameError(f"migration name {migration!r} cannot be part of a metric name")
    for part in parts:
        if not _PART.fullmatch(part or ""):
            raise MetricNameError(f"{part!r} cannot be part of a metric name ([A-Za-z0-9_-], 1-80 characters)")
    name = ".".join((PREFIX, migration, *parts))
    if len(name) > MAX_NAME:
        raise MetricNameError(f"metric name {name[:60]}... is longer than {MAX_NAME} characters")
    return name


def _part(value: str) -> str:
    """A data value (a translation method such as ``exact-sync``) as a name part: unsafe characters become ``_``."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(value))[:80] or "_"


def _metric(kind: Kind, migration: str, parts: tuple[str, ...], value: float, **tags: str) -> Metric:
    return Metric(kind, metric_name(migration, *parts), float(value),
                  tuple(sorted({"migration": migration, **tags}.items())))


def batch_metrics(report: Mapping[str, Any]) -> list[Metric]:
    """A copy batch: records and bytes copied (counters), lag before and after (gauges), duration (timing)."""
    m = str(report["migration"])
    return [
        _metric("incr", m, ("batch", "records_copied"), int(report.get("records_copied") or 0)),
        _metric("incr", m, ("batch", "bytes_copied"), int(report.get("bytes_copied") or 0)),
        _metric("gauge", m, ("batch", "lag_before"), int(report.get("lag_before_total") or 0)),
        _metric("gauge", m, ("batch", "lag_after"), int(report.get("lag_after_total") or 0)),
        _metric("timing", m, ("batch", "duration"), float(report.get("duration_s") or 0.0) * 1000.0),
        _metric("incr", m, ("batch", "count"), 1),
    ]


def promotion_metrics(migration: str, timings: Mapping[str, Mapping[str, Any]]) -> list[Metric]:
    """A promotion run: each step done in this run, its duration (a resumed step took no time in this run)."""
    out = []
    for step, timing in timings.items():
        if timing.get("status") == "done" and timing.get("duration_s") is not None:
            out.append(_metric("timing", migration, ("promotion", _part(step)),
                               float(timing["duration_s"]) * 1000.0, step=_part(step)))
    return out


def translation_metrics(migration: str, summary: Mapping[str, Any]) -> list[Metric]:
    """A translation: how many group partitions each method decided (gauges: the last translation's picture)."""
    out = [_metric("gauge", migration, ("translation", "decisions"), int(summary.get("decisions") or 0)),
           _metric("gauge", migration, ("translation", "flagged"), len(summary.get("flagged") or ()))]
    for method, count in sorted((summary.get("methods") or {}).items()):
        out.append(_metric("gauge", migration, ("translation", "method", _part(method)), int(count),
                           method=_part(method)))
    return out


def decode_metrics(migration: str, result: Mapping[str, Any]) -> list[Metric]:
    """A decode check: records that failed to decode on the destination, and the migration's own faults."""
    faults = sum(int(f.get("records") or 0) for f in result.get("migration_faults") or ())
    return [_metric("incr", migration, ("decode", "failures"), int(result.get("failed") or 0)),
            _metric("incr", migration, ("decode", "migration_faults"), faults)]
