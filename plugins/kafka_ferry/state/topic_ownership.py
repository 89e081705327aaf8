"""Owned-topic records (kind ``owned-topic``) as stored in the state topic: the destination topics this migration
created or adopted, recorded before it does (``provision.topic_ownership`` decides; this module reads and writes).
"""

from __future__ import annotations

from typing import Any

from kafka_ferry.core.common.state_records import OWNED_TOPIC_KIND, TOPIC_KIND, StateSnapshot
from kafka_ferry.core.provisioning.provisioning_plan import ProvisioningRefused, TopicPlan
from kafka_ferry.core.provisioning.topic_ownership import ADOPT, ADOPTED_HOW, CREATED_HOW, OWNED
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.state.store import MigrationStateStore


def owned_topics(spec: MigrationSpec, destination: Cluster) -> set[str]:
    """Destination topics this migration recorded as its own: created or adopted (``owned-topic``), or mirrored
    by a provisioning from before ownership was recorded (``topic``)."""
    state = MigrationStateStore(destination, spec.state_topic_name).read_all()  # empty when the topic is missing
    return set(OWNED_TOPIC_KIND.records(state)) | {
        v["destination_topic"] for v in TOPIC_KIND.records(state).values() if v.get("destination_topic")}


def mirrored_topics(store: MigrationStateStore, state: StateSnapshot | None = None) -> dict[str, dict[str, Any]]:
    """The ``topic`` records provisioning wrote, by source topic (destination_topic, partitions)."""
    return TOPIC_KIND.records(state if state is not None else store.read_all())


def record_ownership(spec: MigrationSpec, plan: TopicPlan, store: MigrationStateStore) -> list[str]:
    """Record each topic provisioning is about to create or adopt (before it does); returns their names."""
    if not plan.ownership:
        raise ProvisioningRefused(["the topic plan was not checked for ownership; nothing was changed"])
    adopted = set(plan.ownership.get(ADOPT, {}))
    owned = set(plan.ownership.get(OWNED, ()))
    records = {a.destination_topic: {"destination_topic": a.destination_topic, "source_topic": a.source_topic,
                                     "how": CREATED_HOW if a.action == "create" else ADOPTED_HOW}
               for a in plan.actions
               if a.action == "create" or (a.destination_topic in adopted and a.destination_topic not in owned)}
    if records:
        store.put_many(OWNED_TOPIC_KIND, records)
    return sorted(records)


def record_topics(spec: MigrationSpec, plan: TopicPlan, destination: Cluster) -> None:
    store = MigrationStateStore(destination, spec.state_topic_name)
    store.put_many(TOPIC_KIND, {a.source_topic: {"destination_topic": a.destination_topic, "partitions": a.partitions}
                             for a in plan.actions})
