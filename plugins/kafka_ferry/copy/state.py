"""Copy progress as stored in the migration's state topic, read once per planner or Spark task."""

from __future__ import annotations

from kafka_ferry.core.progress import PartitionProgress
from kafka_ferry.core.state_records import PROGRESS_KIND
from kafka_ferry.state.store import MigrationStateStore


def stored_progress(store: MigrationStateStore) -> dict[tuple[str, int], PartitionProgress]:
    """Every partition's progress record, by (source topic, partition)."""
    progress = {}
    for value in store.read_kind(PROGRESS_KIND).values():
        p = PartitionProgress.from_record(value)
        progress[(p.source_topic, p.partition)] = p
    return progress
