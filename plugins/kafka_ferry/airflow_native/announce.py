"""What the copy and promotion tasks tell Airflow after their work: asset events, lineage, metrics.

A mixin for the operators (``TopicLineage``) and one function per moment (a batch copied, a promotion run, topics
promoted). Called after the work is durable, so an event or a lineage record never announces what did not happen.
A name Airflow could not store, or a metrics backend that is down, never fails a task that did its work (logged);
a cluster that cannot be read for the promoted topics' cutover offsets does: the retry resumes past the finished
steps and announces then, so a downstream DAG waiting for the promotion is not left without its event.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kafka_ferry.airflow_native.assets import add_copy_events, add_promotion_events
from kafka_ferry.airflow_native.lineage import topic_lineage
from kafka_ferry.airflow_native.metrics import send
from kafka_ferry.core.observability.kafka_assets import AssetNameError
from kafka_ferry.core.observability.metrics_plan import (
    batch_metrics,
    decode_metrics,
    promotion_metrics,
    translation_metrics,
)
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.state.progress import read_progress
from kafka_ferry.state.store import MigrationStateStore

log = logging.getLogger(__name__)


class TopicLineage:
    """OpenLineage methods for a task that moves topics: set ``lineage_topics`` during ``execute``.

    ``get_openlineage_facets_on_start``: the topics are known only once the task reads its plan or the state, so
    the start event names none; ``..._on_complete`` names every (source, mirror) pair the task worked on.
    """

    _lineage: tuple[str | None, str | None, tuple[tuple[str, str], ...]] | None = None

    def lineage_topics(self, source_bootstrap: str | None, destination_bootstrap: str | None,
                       pairs: Iterable[tuple[str, str]]) -> None:
        """Record what this task's lineage names: both clusters' addresses and (source, destination) topics."""
        self._lineage = (source_bootstrap, destination_bootstrap, tuple(sorted(set(pairs))))

    def get_openlineage_facets_on_start(self):
        from airflow.providers.openlineage.extractors import OperatorLineage

        return OperatorLineage()

    def get_openlineage_facets_on_complete(self, task_instance=None):
        from airflow.providers.openlineage.extractors import OperatorLineage

        if self._lineage is None:
            return OperatorLineage()
        return topic_lineage(*self._lineage)


def announce_batch(context: Mapping[str, Any], task: TopicLineage, source_bootstrap: str | None,
                   destination_bootstrap: str | None, report: Mapping[str, Any]) -> dict[str, dict]:
    """A copied batch: its (source, mirror) topics for lineage, one asset event per topic it wrote records to."""
    rows = report.get("partitions") or []
    task.lineage_topics(source_bootstrap, destination_bootstrap,
                        ((r["source_topic"], r["destination_topic"]) for r in rows))
    try:
        return add_copy_events(context, str(report["migration"]), destination_bootstrap, report)
    except AssetNameError as exc:  # a name Airflow could not store: the copy stands, the event is not made
        log.warning("no asset events for batch %s: %s", report.get("batch_id"), exc)
        return {}


def batch_measured(report: Mapping[str, Any]) -> int:
    """A finished batch's metrics (records, bytes, lag before and after, duration)."""
    return send(batch_metrics(report))


def promoted_topics(store: MigrationStateStore, spec: MigrationSpec, source_topics: Iterable[str]
                    ) -> dict[str, tuple[str, dict[int, tuple[int, int | None]]]]:
    """Destination topic -> (source topic, cutover offsets): per partition, the next source offset copied and the
    next destination offset, from the stored copy progress (what consumers and producers continue from)."""
    wanted = set(source_topics)
    out: dict[str, tuple[str, dict[int, tuple[int, int | None]]]] = {}
    for (topic, partition), p in sorted(read_progress(store).items()):
        if topic not in wanted:
            continue
        destination = spec.topics.rename.destination_topic(topic)
        next_down = None if p.last_downstream_offset is None else p.last_downstream_offset + 1
        out.setdefault(destination, (topic, {}))[1][partition] = (p.next_upstream_offset, next_down)
    for topic in wanted:  # a promoted topic that never held a record still gets its event
        out.setdefault(spec.topics.rename.destination_topic(topic), (topic, {}))
    return out


def announce_promotion(context: Mapping[str, Any], task: TopicLineage, spec: MigrationSpec,
                       store: MigrationStateStore, source_bootstrap: str | None, destination_bootstrap: str | None,
                       source_topics: Iterable[str], run_id: str, mark: bool,
                       promoted_at_ms: int | None = None) -> dict[str, dict]:
    """A promotion task: lineage of its topics; with ``mark`` (the topics are now promoted) one event per topic."""
    promoted = promoted_topics(store, spec, source_topics)
    task.lineage_topics(source_bootstrap, destination_bootstrap, ((s, d) for d, (s, _) in promoted.items()))
    if not mark:
        return {}
    try:
        return add_promotion_events(context, spec.name, destination_bootstrap, promoted, run_id, promoted_at_ms)
    except AssetNameError as exc:
        log.warning("no asset events for the promotion of %s: %s", spec.name, exc)
        return {}


def promotion_measured(migration: str, report: Mapping[str, Any]) -> int:
    """A promotion task's step durations (the steps it ran, not those it resumed past)."""
    return send(promotion_metrics(migration, report.get("this_run") or {}))


def translation_measured(migration: str, summary: Mapping[str, Any]) -> int:
    """A catch-up translation: decisions per method, and how many were flagged."""
    return send(translation_metrics(migration, summary))


def decode_measured(migration: str, result: Mapping[str, Any]) -> int:
    """A decode check: records that do not decode on the destination, and those the migration damaged."""
    return send(decode_metrics(migration, result))
