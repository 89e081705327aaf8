"""Staged cutover records in the migration state topic: which groups and topics are promoted, by which run, when.

The rules are in ``core.cutover.staged_cutover``; this module only reads and writes their records and applies the two
catch-up exclusions (a promoted group's offsets are never committed again, a promoted topic is not copied again).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND, TOPIC_PROMOTION_KIND, StateKind, StateSnapshot
from kafka_ferry.core.cutover.staged_cutover import UnitPromotion, groups_to_commit, promoted_names
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.state.protocol import StateReader
from kafka_ferry.state.store import MigrationStateStore


def read_promotions(store: MigrationStateStore, kind: StateKind,
                    state: StateSnapshot | None = None) -> dict[str, UnitPromotion]:
    """Every stored promotion record of ``kind`` (group or topic), by name."""
    records = (state if state is not None else store.read_all()).get(kind, {})
    return {k: UnitPromotion.from_record(kind, k, v) for k, v in sorted(records.items())}


def save_promotion(store: MigrationStateStore, kind: StateKind, record: UnitPromotion) -> None:
    store.put(kind, record.name, record.to_record())


def promoted_groups(store: StateReader, state: StateSnapshot | None = None) -> list[str]:
    return promoted_names((state if state is not None else store.read_all()).get(GROUP_PROMOTION_KIND, {}),
                          GROUP_PROMOTION_KIND)


def promoted_topics(store: StateReader, state: StateSnapshot | None = None) -> list[str]:
    return promoted_names((state if state is not None else store.read_all()).get(TOPIC_PROMOTION_KIND, {}),
                          TOPIC_PROMOTION_KIND)


def without_promoted_groups(store: MigrationStateStore, decisions: Iterable[Any]) -> list[Any]:
    """The decisions a catch-up run may commit: none of a promoted group (its consumers own its offsets)."""
    decisions = list(decisions)
    allowed = set(groups_to_commit({d.group for d in decisions}, promoted_groups(store)))
    return [d for d in decisions if d.group in allowed]


def reset_staged_promotions(store: MigrationStateStore) -> dict[StateKind, list[str]]:
    """Delete every group and topic promotion record (an explicit reset, like ``reset_promotion``)."""
    state = store.read_all()
    out: dict[StateKind, list[str]] = {}
    for kind in (GROUP_PROMOTION_KIND, TOPIC_PROMOTION_KIND):
        keys = sorted(state.get(kind, {}))
        if keys:
            store.put_many(kind, {k: None for k in keys})
        out[kind] = keys
    return out


def recorded_promotions(spec: MigrationSpec, destination: KafkaCluster) -> tuple[list[str], list[str]]:
    """(promoted groups, promoted topics) as the state topic says now; none before the first provisioning."""
    if spec.state_topic_name not in destination.list_topic_names():
        return [], []
    store = MigrationStateStore(destination, spec.state_topic_name)
    state = store.read_all()
    return promoted_groups(store, state), promoted_topics(store, state)


def forget_group_promotion(store: MigrationStateStore, group: str) -> None:
    """A rolled-back group is a migrated, unpromoted group again (``promotion.group_rollback``)."""
    store.put(GROUP_PROMOTION_KIND, group, None)


def forget_topic_promotion(store: MigrationStateStore, topic: str) -> None:
    """A rolled-back topic is a mirrored, unpromoted topic again: catch-up copies it (``promotion.topic_rollback``)."""
    store.put(TOPIC_PROMOTION_KIND, topic, None)
