"""Plan the next copy batch from what the clusters hold now and the progress stored on the destination.

Runs on the Airflow side (with both ``KafkaCluster``s). Gathers, per selected source partition, the stored
next offset, the log start and the last stable offset, and lets ``core.batch_planning`` decide; a
retention gap raises ``RetentionGapError`` naming every lost range unless the spec accepts gaps, in
which case ``record_accepted_gaps`` writes them to the gap ledger before anything is copied.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from kafka_ferry.copy.plan import CopyPlan, PartitionTask
from kafka_ferry.copy.state import stored_progress
from kafka_ferry.core.batch_planning import PartitionPosition, plan_batch
from kafka_ferry.core.mm2_wire import offset_syncs_topic
from kafka_ferry.core.progress import PartitionProgress
from kafka_ferry.core.provisioning_plan import select_topics
from kafka_ferry.core.spec import MigrationSpec
from kafka_ferry.core.staged_cutover import promoted_names, topics_to_copy
from kafka_ferry.core.state_records import GAP_KIND, PROGRESS_KIND, TOPIC_PROMOTION_KIND, gap_key, partition_key
from kafka_ferry.stages.schemas import record_rewriter
from kafka_ferry.state.store import MigrationStateStore

log = logging.getLogger(__name__)


class DestinationNotProvisioned(RuntimeError):
    """A source partition has no destination partition to copy into: provisioning has not run (or lagged)."""


def plan_copy(spec: MigrationSpec, source: Any, destination: Any, store: MigrationStateStore,
              now_ms: int | None = None) -> CopyPlan:
    """The next batch: ``[stored next offset, last stable offset)`` per partition, capped by the spec."""
    promoted = promoted_names(store.read_kind(TOPIC_PROMOTION_KIND), TOPIC_PROMOTION_KIND)
    topics = topics_to_copy(select_topics(spec, source.list_topic_names()), promoted)  # producers moved off those
    partitions = source.partitions_of(topics)
    rename = spec.topics.rename.destination_topic
    _check_destination(destination, partitions, rename)
    log_start = source.list_offsets(partitions, "earliest")
    stable_end = source.list_offsets(partitions, "latest", read_committed=True)
    progress = stored_progress(store)
    positions = [
        PartitionPosition(t, p, progress[(t, p)].next_upstream_offset if (t, p) in progress else None,
                          log_start[(t, p)], stable_end[(t, p)])
        for t, p in partitions
    ]
    copy = spec.copy_settings
    batch = plan_batch(positions, copy.max_records_per_partition, copy.max_bytes_per_partition,
                       accept_retention_gaps=copy.accept_retention_gaps)
    lag_before = {partition_key(pos.topic, pos.partition):
                  pos.end_offset - max(pos.log_start_offset, pos.stored_next_offset or 0) for pos in positions}
    return CopyPlan(
        migration=spec.name,
        batch_id=batch.batch_id,
        source_cluster_id=source.describe_cluster().cluster_id,
        destination_cluster_id=destination.describe_cluster().cluster_id,
        state_topic=spec.state_topic_name,
        offset_syncs_topic=offset_syncs_topic(spec.destination.alias),
        provenance_headers=copy.provenance_headers,
        offset_sync_interval=copy.offset_sync_interval,
        max_records_per_partition=copy.max_records_per_partition,
        max_bytes_per_partition=copy.max_bytes_per_partition,
        tasks=tuple(PartitionTask(r.topic, r.partition, rename(r.topic), r.start_offset, r.end_offset)
                    for r in batch.ranges),
        gaps=batch.gaps,
        lag_before=lag_before,
        planned_at_ms=int(time.time() * 1000) if now_ms is None else now_ms,
        **_schema_ids(spec, store),
    )


def _schema_ids(spec: MigrationSpec, store: MigrationStateStore) -> dict[str, Any]:
    rewriter = record_rewriter(spec, store)
    if rewriter is None:
        return {}
    return {"schema_id_map": {str(k): v for k, v in sorted(rewriter.id_map.items())},
            "unknown_schema_id_policy": rewriter.policy}


def _check_destination(destination: Any, partitions: list[tuple[str, int]], rename) -> None:
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
    progress = stored_progress(store) if progress is None else progress
    now_ms = int(time.time() * 1000)
    store.put_many(GAP_KIND, {
        gap_key(g.topic, g.partition, g.lost_start):
            {**asdict(g), "lost_count": g.lost_count, "batch_id": plan.batch_id, "recorded_at_ms": now_ms}
        for g in plan.gaps})
    moved = {}
    copied = {(t.source_topic, t.partition) for t in plan.tasks}
    for g in plan.gaps:
        if (g.topic, g.partition) in copied:
            continue
        old = progress.get((g.topic, g.partition))
        if old is None or old.next_upstream_offset < g.lost_end:
            moved[partition_key(g.topic, g.partition)] = PartitionProgress(
                source_topic=g.topic, partition=g.partition,
                destination_topic=destination_topic(g.topic),
                next_upstream_offset=g.lost_end,
                last_upstream_offset=old.last_upstream_offset if old else None,
                last_downstream_offset=old.last_downstream_offset if old else None,
                records_copied=old.records_copied if old else 0, batch_id=plan.batch_id).as_record()
    if moved:
        store.put_many(PROGRESS_KIND, moved)
    lines = [f"{g.topic}-{g.partition} [{g.lost_start}, {g.lost_end}) {g.lost_count} offsets lost" for g in plan.gaps]
    for line in lines:
        log.warning("accepted retention gap: %s", line)
    return lines
