"""Timestamp plans (kind ``timestamps``) as stored in the state topic: the values each mirror's timestamp type and
limits had before provisioning lifted them, so promotion restores them (``core.provisioning.time_fidelity`` holds the
rules).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_ferry.core.common.state_records import TIMESTAMPS_KIND
from kafka_ferry.core.provisioning.provisioning_plan import TopicPlan
from kafka_ferry.core.provisioning.time_fidelity import TopicTimePlan
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.state.store import MigrationStateStore


def recorded_time_plans(spec: MigrationSpec, destination: Cluster) -> dict[str, TopicTimePlan]:
    """The timestamp plans of earlier provisionings (their values to restore), by source topic."""
    if spec.state_topic_name not in destination.list_topic_names():
        return {}
    records = time_plan_records(MigrationStateStore(destination, spec.state_topic_name))
    return {topic: TopicTimePlan.from_record(value) for topic, value in records.items()}


def record_time_plans(spec: MigrationSpec, plan: TopicPlan, destination: Cluster) -> None:
    """The timestamp plan of each mirror not planned before; written before the limits are lifted.

    Why before: a provisioning killed after lifting would otherwise leave no record of the values to restore.
    """
    store = MigrationStateStore(destination, spec.state_topic_name)
    recorded = time_plan_records(store)
    store.put_many(TIMESTAMPS_KIND, {a.source_topic: {**a.time.as_record(), "status": "copying"}
                                     for a in plan.actions if a.time and a.source_topic not in recorded})


def time_plan_records(store: MigrationStateStore) -> dict[str, dict[str, Any]]:
    """Every stored timestamp plan as its record (with its status: copying, or switched by the promotion)."""
    return store.read_kind(TIMESTAMPS_KIND)


def save_time_plan_records(store: MigrationStateStore, records: Mapping[str, Mapping[str, Any]]) -> None:
    """Write plan records back (the promotion's ``switch_timestamps`` sets status switched)."""
    store.put_many(TIMESTAMPS_KIND, records)
