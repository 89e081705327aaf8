"""Making a copy batch's plan (Airflow side, ``plan_copy``): per selected source partition the stored next
offset, the log start and the last stable offset; ``core.batches.batch_planning`` decides the ranges (pure); the
spec's copy settings go into the plan as they are, because the copier reads each of them. A retention gap
raises ``RetentionGapError`` naming every lost range unless the spec accepts gaps; then
``record_accepted_gaps`` writes them to the gap ledger before anything is copied.

Apart from ``copy.plan`` (the plan type and its file) because the Spark job's driver and every Python
worker import that one: planning needs the spec (pydantic) and the schema stage (the registry client),
imports per process that the copy itself never uses.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_ferry.copy.plan import CopyPlan, PartitionTask
from kafka_ferry.core.batches.batch_planning import PartitionPosition, plan_ranges
from kafka_ferry.core.batches.batch_window import parse_window, window_deadline
from kafka_ferry.core.batches.batch_window import records_budget as window_budget
from kafka_ferry.core.batches.copy_rate import sizing_rate
from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.common.dates import iso_utc
from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.common.state_records import partition_key
from kafka_ferry.core.cutover.staged_cutover import topics_to_copy
from kafka_ferry.core.offsets.mm2_wire import offset_syncs_topic
from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.schemas.serialized_fields import FieldsUndecided
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.core.units import streams_apps
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.state.batches import migration_rate
from kafka_ferry.state.gaps import save_gaps
from kafka_ferry.state.progress import read_progress, save_progress
from kafka_ferry.state.schema_ids import record_rewriter
from kafka_ferry.state.staged_cutover import promoted_topics
from kafka_ferry.state.store import MigrationStateStore

log = logging.getLogger(__name__)


class DestinationNotProvisioned(Retryable, RuntimeError):
    """A source partition has no destination partition to copy into: provisioning has not run (or lagged)."""


def plan_copy(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster, store: MigrationStateStore,
              now_ms: int | None = None, dry_run: bool = False, window: RunWindow | None = None) -> CopyPlan:
    """The next batch: ``[stored next offset, last stable offset)`` per partition, capped by the spec.

    ``dry_run``: the batch a run would copy once provisioned, so mirrors that provisioning would still create or
    grow are no refusal (a dry run of a migration that never ran answers with its first batch). ``window``: the
    run's due time and timezone when ``copy.window`` applies (a catch-up run; never the promotion's final copy):
    the plan carries the deadline and is sized from the migration's measured rate to end inside it."""
    promoted = promoted_topics(store)
    topics = topics_to_copy(select_topics(spec, source.list_topic_names()), promoted)  # producers moved off those
    partitions = source.partitions_of(topics)
    rename = spec.topics.rename.destination_topic
    if not dry_run:
        _check_destination(destination, partitions, rename)
    log_start = source.list_offsets(partitions, "earliest")
    consumed = repartition_consumed(spec, source, topics)  # after the log start: commits only move forward
    stable_end = source.list_offsets(partitions, "latest", read_committed=True)
    progress = read_progress(store)
    positions = [
        PartitionPosition(t, p, progress[(t, p)].next_upstream_offset if (t, p) in progress else None,
                          log_start[(t, p)], stable_end[(t, p)])
        for t, p in partitions
    ]
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    deadline_ms = budget = None
    if window is not None and spec.copy_settings.window is not None:
        deadline_ms = window_deadline(parse_window(spec.copy_settings.window), window.due_ms, window.timezone)
        rate = sizing_rate(migration_rate(store), spec.copy_settings.rate_limit)
        budget = window_budget(rate, now_ms, deadline_ms)
        log.info("window %s: deadline %s, %s", spec.copy_settings.window, iso_utc(deadline_ms),
                 "closed: nothing to copy" if budget == 0 else "no measured rate yet: the deadline alone bounds it"
                 if budget is None else f"sized for {budget} offsets at {rate:.0f} records/s")
    return build_plan(spec, positions, source.describe_cluster().cluster_id,
                      destination.describe_cluster().cluster_id, schema_ids=_schema_ids(spec, store, topics, dry_run),
                      now_ms=now_ms, deadline_ms=deadline_ms, records_budget=budget, consumed_below=consumed)


def repartition_consumed(spec: MigrationSpec, source: KafkaCluster, topics: Sequence[str]
                         ) -> dict[tuple[str, int], int]:
    """Per partition of a Kafka Streams application's repartition topic among ``topics``, the application's
    committed offset: Streams purges the topic up to there once it has processed the records, so a gap below it
    lost nothing anyone reads (``core.batches.batch_planning.plan_ranges``'s ``consumed_below``). Read after the log
    start: a purge never passes a commit, and commits only move forward."""
    if not any(t.endswith(streams_apps.REPARTITION_SUFFIX) for t in topics):
        return {}
    groups = source.list_group_ids()
    apps = sorted({*spec.declared_applications, *streams_apps.detect(groups, topics)} & set(groups))
    owned = {t: streams_apps.owner(t, apps) for t in topics if t.endswith(streams_apps.REPARTITION_SUFFIX)}
    owners = sorted({a for a in owned.values() if a})
    committed = source.groups_offsets(owners) if owners else {}
    return {(t, p): offset for app in owners for (t, p), offset in committed.get(app, {}).items()
            if owned.get(t) == app}


@dataclass(frozen=True)
class RunWindow:
    """What a catch-up run's window is counted from: the run's due time (epoch ms) and the DAG's timezone."""

    due_ms: int
    timezone: str = "UTC"


def build_plan(spec: MigrationSpec, positions: Sequence[PartitionPosition], source_cluster_id: str,
               destination_cluster_id: str, schema_ids: Mapping[str, Any] | None = None,
               now_ms: int | None = None, deadline_ms: int | None = None,
               records_budget: int | None = None,
               consumed_below: Mapping[tuple[str, int], int] | None = None) -> CopyPlan:
    """The plan of these positions (pure): ranges from ``core.batches.batch_planning``, the copy settings as the spec
    gives them, destination topic names through the spec's rename; a window's deadline and offsets budget."""
    copy = spec.copy_settings
    batch_id, ranges, gaps = plan_ranges(positions, copy.max_records_per_partition, copy.max_bytes_per_partition,
                                         accept_retention_gaps=copy.accept_retention_gaps,
                                         records_budget=records_budget, consumed_below=consumed_below)
    rename = spec.topics.rename.destination_topic
    return CopyPlan(
        migration=spec.name,
        batch_id=batch_id,
        source_cluster_id=source_cluster_id,
        destination_cluster_id=destination_cluster_id,
        state_topic=spec.state_topic_name,
        offset_syncs_topic=offset_syncs_topic(spec.destination.alias),
        provenance_headers=copy.provenance_headers,
        offset_sync_interval=copy.offset_sync_interval,
        max_records_per_partition=copy.max_records_per_partition,
        max_bytes_per_partition=copy.max_bytes_per_partition,
        lanes_per_task=copy.lanes_per_task,
        max_bytes_per_second=copy.max_bytes_per_second,
        max_records_per_second=copy.max_records_per_second,
        window=copy.window if deadline_ms is not None else None,
        deadline_ms=deadline_ms,
        window_budget_records=records_budget,
        tasks=tuple(PartitionTask(r.topic, r.partition, rename(r.topic), r.start_offset, r.end_offset)
                    for r in ranges),
        gaps=gaps,
        lag_before={partition_key(p.topic, p.partition):
                    p.end_offset - max(p.log_start_offset, p.stored_next_offset or 0) for p in positions},
        planned_at_ms=int(time.time() * 1000) if now_ms is None else now_ms,
        **(schema_ids or {}),
    )


# A copy-back copies every range it is given in one go: no per-partition cap
UNCAPPED = 1 << 62


def build_copy_back_plan(spec: MigrationSpec, tasks: Sequence[PartitionTask], source_cluster_id: str,
                         destination_cluster_id: str, schema_ids: Mapping[str, Any] | None = None,
                         now_ms: int | None = None) -> CopyPlan:
    """A rollback's copy-back as a copy plan (pure), built here beside ``build_plan`` so that both take the same
    settings from the spec. The copy runs destination -> source: ``source_cluster_id`` is the migration's
    destination's id and ``destination_cluster_id`` its source's. It keeps progress in the copy-back's own state
    topic on the source (``spec.copy_back_state_topic_name``) and syncs in the source alias's sync log, always
    with provenance headers (they tell a later catch-up what came back), at the spec's sync interval; no cap, no
    window and no rate limit: the rollback waits for every range it planned."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return CopyPlan(
        migration=spec.name, batch_id=f"rollback-{now_ms}",
        source_cluster_id=source_cluster_id, destination_cluster_id=destination_cluster_id,
        state_topic=spec.copy_back_state_topic_name, offset_syncs_topic=offset_syncs_topic(spec.source.alias),
        provenance_headers=True, offset_sync_interval=spec.copy_settings.offset_sync_interval,
        max_records_per_partition=UNCAPPED, max_bytes_per_partition=UNCAPPED, tasks=tuple(tasks),
        **(schema_ids or {}))


def _schema_ids(spec: MigrationSpec, store: MigrationStateStore, topics: Sequence[str],
                dry_run: bool = False) -> dict[str, Any]:
    """Remap mode: the id map, its policy, and per copied topic the fields it applies to (decided by the
    schema migration; a topic it has not decided stops the plan: FieldsUndecided names it)."""
    rewriter = record_rewriter(spec, store)
    if rewriter is None:
        return {}
    try:
        fields = rewriter.fields_by_topic(topics)
    except FieldsUndecided:
        if not dry_run:
            raise
        # A dry run stores no decision (its schema stage writes nothing), so a topic new since the last real run
        # has none yet: the plan still answers, with the fields of the topics decided so far.
        fields = rewriter.fields_by_topic(t for t in topics if t in rewriter.decisions)
    return {"schema_id_map": {str(k): v for k, v in sorted(rewriter.id_map.items())},
            "unknown_schema_id_policy": rewriter.policy, "serialized_fields": fields}


def _check_destination(destination: KafkaCluster, partitions: list[tuple[str, int]], rename) -> None:
    wanted: dict[str, int] = {}
    for topic, partition in partitions:
        wanted[rename(topic)] = max(wanted.get(rename(topic), 0), partition + 1)
    existing = destination.describe_topics(wanted)
    short = [f"{name} (needs {count} partitions, has {existing[name].partitions if name in existing else 0})"
             for name, count in sorted(wanted.items())
             if name not in existing or existing[name].partitions < count]
    if short:
        raise DestinationNotProvisioned(
            f"destination topics missing or too small: {', '.join(short)}; run provision_topics first")


def record_accepted_gaps(plan: CopyPlan, store: MigrationStateStore, destination_topic: Callable[[str], str],
                         progress: Mapping[tuple[str, int], PartitionProgress] | None = None) -> list[str]:
    """Write accepted gaps to the ledger; move progress past a gap where nothing is left to copy.

    Idempotent: the ledger is keyed by range start. Progress only moves for partitions the plan does not
    copy (the copy itself moves the others), and only forward: the lost offsets are gone from the source.
    """
    if not plan.gaps:
        return []
    progress = read_progress(store) if progress is None else progress
    now_ms = int(time.time() * 1000)
    save_gaps(store, plan.gaps, plan.batch_id, now_ms)
    moved = []
    copied = {(t.source_topic, t.partition) for t in plan.tasks}
    for g in plan.gaps:
        if (g.topic, g.partition) in copied:
            continue
        old = progress.get((g.topic, g.partition))
        if old is None or old.next_upstream_offset < g.lost_end:
            moved.append(PartitionProgress(
                source_topic=g.topic, partition=g.partition,
                destination_topic=destination_topic(g.topic),
                next_upstream_offset=g.lost_end,
                last_upstream_offset=old.last_upstream_offset if old else None,
                last_downstream_offset=old.last_downstream_offset if old else None,
                records_copied=old.records_copied if old else 0, batch_id=plan.batch_id))
    save_progress(store, moved)
    lines = [f"{g.topic}-{g.partition} [{g.lost_start}, {g.lost_end}) {g.lost_count} offsets lost" for g in plan.gaps]
    for line in lines:
        log.warning("accepted retention gap: %s", line)
    return lines
