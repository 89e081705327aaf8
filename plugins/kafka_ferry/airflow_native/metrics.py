"""Sends ``core.observability.metrics_plan``'s metrics through Airflow's ``Stats`` (StatsD, Datadog or OpenTelemetry).

Airflow sets ``Stats`` up from ``[metrics]`` (``statsd_on``, ``statsd_host``/``port``/``prefix``, or ``otel_on``)
in every process that runs tasks; without it the calls go nowhere. A metrics backend that is down must never fail a
migration: a send that raises is logged and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from airflow.sdk.observability.stats import Stats

from kafka_ferry.core.observability.metrics_plan import Metric

log = logging.getLogger(__name__)


def send(metrics: Iterable[Metric]) -> int:
    """Send each metric; returns how many were handed to the backend."""
    sent = 0
    try:
        for m in metrics:
            tags = dict(m.tags)
            if m.kind == "incr":
                Stats.incr(m.name, count=int(m.value), tags=tags)
            elif m.kind == "gauge":
                # a whole number goes as one ("60|g", not "60.0|g"): what StatsD dashboards and alerts compare
                Stats.gauge(m.name, int(m.value) if m.value.is_integer() else m.value, tags=tags)
            else:
                Stats.timing(m.name, m.value, tags=tags)
            sent += 1
    except Exception:  # metrics are a view of the migration, never a reason to fail it
        log.warning("kafka-ferry metrics: sending failed after %d metric(s)", sent, exc_info=True)
    return sent
