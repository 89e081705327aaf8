"""Copy progress and migrated groups as stored in the migration's state topic.

The one reader of each: the planner, the Spark task, translation, promotion and the decode check all read
progress here, so they agree on what "copied so far" means.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_ferry.core.progress import PartitionProgress
from kafka_ferry.core.state_records import GROUP_KIND, PROGRESS_KIND
from kafka_ferry.state.store import MigrationStateStore


def read_progress(store: MigrationStateStore, state: Mapping | None = None) -> dict[tuple[str, int], PartitionProgress]:
    """Every partition's progress record, by (source topic, partition); ``state``: an already read ``read_all()``."""
    records = PROGRESS_KIND.records(state or store.read_all())
    progress = [PartitionProgress.from_record(v) for v in records.values()]
    return {(p.source_topic, p.partition): p for p in progress}


def migrated_groups(store: MigrationStateStore, state: Mapping | None = None) -> dict[str, list[str]]:
    """Groups recorded by ProvisionMirrorGroupsOperator -> their migrated source topics."""
    records = GROUP_KIND.records(state or store.read_all())
    return {g: list(v.get("source_topics", [])) for g, v in sorted(records.items())}


def save_migrated_groups(store: MigrationStateStore, migrated: Mapping[str, list[str]]) -> None:
    """Record each migrated group with its source topics (what translation and promotion read back)."""
    store.put_many(GROUP_KIND, {g: {"source_topics": list(t)} for g, t in migrated.items()})


def read_progress_records(store: MigrationStateStore, state: Mapping | None = None) -> dict[tuple[str, int], dict]:
    """Every partition's progress record as stored, ``written_at_ms`` included (when each partition finished):
    what a batch's live view needs beyond ``read_progress``."""
    records = PROGRESS_KIND.records(state or store.read_all())
    return {(v["source_topic"], int(v["partition"])): dict(v) for v in records.values()}
