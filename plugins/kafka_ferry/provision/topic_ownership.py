"""Ownership of destination topics against the live destination: gather, decide (``core.provisioning.topic_ownership``),
record.

Read-only until ``record_ownership``, which provisioning calls before it creates or adopts a topic: a run killed
between the record and the creation finds its topic recorded, so the next run provisions it as its own.
"""

from __future__ import annotations

import dataclasses

from kafka_ferry.core.common.cluster_model import TopicInfo
from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.core.provisioning.provisioning_plan import TopicPlan
from kafka_ferry.core.provisioning.topic_ownership import (
    TopicContents,
    decide_ownership,
)
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.reads import consumed_headers, read_ranges
from kafka_ferry.state.topic_ownership import owned_topics

# An adopted topic's records are each checked for provenance; beyond this many the pre-flight would take minutes.
ADOPT_SCAN_LIMIT = 200_000


def topic_contents(destination: KafkaCluster, topic: TopicInfo, source_cluster_id: str, scan: bool) -> TopicContents:
    """How many records ``topic`` holds and, when ``scan``, how many carry no provenance from the source cluster."""
    partitions = [(topic.name, p) for p in range(topic.partitions)]
    starts = destination.list_offsets(partitions, "earliest", read_committed=False)
    ends = destination.list_offsets(partitions, "latest", read_committed=False)
    records = sum(max(0, ends[tp] - starts[tp]) for tp in partitions)
    if not scan or records == 0:
        return TopicContents(records, 0 if records == 0 else None, "" if records == 0 else "not read")
    if records > ADOPT_SCAN_LIMIT:
        return TopicContents(records, None, f"more than {ADOPT_SCAN_LIMIT} records to check")
    foreign = 0
    for msg in read_ranges(destination, {tp: (starts[tp], ends[tp]) for tp in partitions}, read_committed=False):
        cluster, _ = read_provenance(consumed_headers(msg))
        foreign += cluster != source_cluster_id
    return TopicContents(records, foreign)


def check_ownership(spec: MigrationSpec, plan: TopicPlan, source: KafkaCluster, destination: KafkaCluster,
                    destination_topics: dict[str, TopicInfo]) -> TopicPlan:
    """The plan with every mirror's ownership decided and its refusals added (nothing is changed)."""
    existing = [a for a in plan.actions if a.destination_topic in destination_topics]
    owned = owned_topics(spec, destination) if existing else set()
    adopt = set(spec.topics.adopt)
    contents = {}
    if any(a.destination_topic not in owned for a in existing):
        source_id = source.describe_cluster().cluster_id
        contents = {a.destination_topic: topic_contents(destination, destination_topics[a.destination_topic],
                                                        source_id, scan=a.destination_topic in adopt)
                    for a in existing if a.destination_topic not in owned}
    decided = decide_ownership(spec.name, plan.actions, destination_topics, owned, adopt, contents)
    return dataclasses.replace(plan, refusals=plan.refusals + decided.refusals, ownership=decided.as_dict())
