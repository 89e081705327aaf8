"""Copy progress and migrated groups as stored in the migration's state topic.

The one reader and writer of each: the planner, the Spark task, translation, promotion and the decode check all read
progress here, so they agree on what "copied so far" means.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.common.state_records import GROUP_KIND, PROGRESS_KIND, StateKind, StateSnapshot
from kafka_ferry.state.protocol import StateReader
from kafka_ferry.state.store import MigrationStateStore


def read_progress(store: MigrationStateStore,
                  state: StateSnapshot | None = None) -> dict[tuple[str, int], PartitionProgress]:
    """Every partition's progress record, by (source topic, partition); ``state``: an already read ``read_all()``."""
    records = PROGRESS_KIND.records(state or store.read_all())
    progress = [PartitionProgress.from_record(v) for v in records.values()]
    return {(p.source_topic, p.partition): p for p in progress}


def save_progress(store: MigrationStateStore, progress: Iterable[PartitionProgress]) -> None:
    """Write each partition's progress record (the copier after a partition; the planner past an accepted gap)."""
    records = {p.key: p.as_record() for p in progress}
    if records:
        store.put_many(PROGRESS_KIND, records)


def migrated_groups(store: StateReader, state: StateSnapshot | None = None) -> dict[str, list[str]]:
    """Groups recorded by ProvisionMirrorGroupsOperator -> their migrated source topics."""
    records = GROUP_KIND.records(state or store.read_all())
    return {g: list(v.get("source_topics", [])) for g, v in sorted(records.items())}


def save_migrated_groups(store: MigrationStateStore, migrated: Mapping[str, Sequence[str]]) -> None:
    """Record each migrated group with its source topics (what translation and promotion read back)."""
    store.put_many(GROUP_KIND, {g: {"source_topics": list(t)} for g, t in migrated.items()})


def read_progress_records(store: MigrationStateStore,
                          state: StateSnapshot | None = None) -> dict[tuple[str, int], dict[str, Any]]:
    """Every partition's progress record as stored, ``written_at_ms`` included (when each partition finished):
    what a batch's live view needs beyond ``read_progress``."""
    records = PROGRESS_KIND.records(state or store.read_all())
    return {(v["source_topic"], int(v["partition"])): dict(v) for v in records.values()}


class PlannedGroups:
    """The migration's state as reads would see it once ``migrated`` groups are recorded (what a dry run's fence
    plan reads: it writes nothing, so the groups it would record are not there yet); writes are refused."""

    def __init__(self, store: MigrationStateStore, migrated: Mapping[str, Iterable[str]]) -> None:
        self.topic = store.topic
        self._store, self._migrated = store, migrated

    def read_all(self) -> dict[StateKind, dict[str, dict[str, Any]]]:
        state = dict(self._store.read_all())
        state[GROUP_KIND] = {**state.get(GROUP_KIND, {}),
                             **{g: {"source_topics": list(t)} for g, t in self._migrated.items()}}
        return state

    def read_kind(self, kind: StateKind) -> dict[str, dict[str, Any]]:
        return dict(self.read_all().get(kind, {}))

    def put_many(self, *_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a dry run writes no state")
