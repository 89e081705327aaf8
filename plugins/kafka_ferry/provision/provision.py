"""Provisioning against live clusters: gather what both clusters hold, plan (pure), then apply.

Every function re-reads the clusters, so running it again after a crash or retry only does what is
still missing: the plan of a finished provisioning is all "none".
"""

from __future__ import annotations

import logging

from kafka_ferry.core.cutover.staged_cutover import topics_to_copy
from kafka_ferry.core.offsets.mm2_wire import (
    HEARTBEATS_TOPIC,
    checkpoints_topic,
    offset_syncs_topic,
    remote_heartbeats_topic,
)
from kafka_ferry.core.provisioning.provisioning_plan import (
    GroupPlan,
    TopicPlan,
    plan_groups,
    plan_topics,
    select_topics,
)
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.provision.topic_ownership import check_ownership
from kafka_ferry.state.progress import save_migrated_groups
from kafka_ferry.state.staged_cutover import recorded_promotions
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.state.time_plans import recorded_time_plans

log = logging.getLogger(__name__)

# The offset-sync history is what exact translation reads, so compaction must not fold it during a
# migration: records younger than this are never compacted (MM2's own topic compacts freely).
OFFSET_SYNCS_COMPACTION_LAG_MS = str(30 * 24 * 3600 * 1000)


def compute_topic_plan(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster) -> TopicPlan:
    """The plan for every selected topic whose copy has not ended: a promoted topic is left alone."""
    selected = select_topics(spec, source.list_topic_names())
    source_topics = source.describe_topics(selected)
    dest_names = [spec.topics.rename.destination_topic(t) for t in selected]
    destination_topics = destination.describe_topics(dest_names)
    # Read after the describes: a topic promoted before them is left out. One promoted in between was planned
    # from a mirror its new producers had not touched yet (they start after the promoted mark), so its plan
    # is what any earlier run applied already ("unchanged" once provisioned).
    copying = topics_to_copy(selected, recorded_promotions(spec, destination)[1])
    plan = plan_topics(spec, {t: i for t, i in source_topics.items() if t in copying}, destination_topics,
                       destination.describe_cluster().broker_count, recorded_time_plans(spec, destination))
    return check_ownership(spec, plan, source, destination, destination_topics)  # only what it owns or adopts


def apply_topic_plan(plan: TopicPlan, destination: KafkaCluster) -> list[str]:
    """Apply a plan that has no refusals; returns what was done, one line per change."""
    plan.raise_if_refused()
    done = []
    # Every new mirror in one CreateTopics request (a fleet's hundreds of topics: one request, not one each).
    created = destination.create_topics((a.destination_topic, a.partitions, a.replication_factor, a.configs)
                                        for a in plan.changes if a.action == "create")
    for action in plan.changes:
        if action.action == "create":
            done.append(action.describe() if created[action.destination_topic]
                        else f"exists already {action.destination_topic}")
            continue
        if "grow" in action.action:
            destination.grow_partitions(action.destination_topic, action.partitions)
        if action.config_changes:
            new_values = {k: v for k, (_, v) in action.config_changes.items()}
            destination.set_topic_configs(action.destination_topic, new_values)
        done.append(action.describe())
    for line in done:
        log.info("provisioned: %s", line)
    return done


def internal_topics(spec: MigrationSpec) -> dict[str, dict[str, str]]:
    """The MM2-named topics kafka-ferry writes on the destination, with their configs."""
    return {
        offset_syncs_topic(spec.destination.alias): {
            "cleanup.policy": "compact", "min.compaction.lag.ms": OFFSET_SYNCS_COMPACTION_LAG_MS},
        checkpoints_topic(spec.source.alias): {"cleanup.policy": "compact"},
        HEARTBEATS_TOPIC: {"cleanup.policy": "compact"},  # one record per flow (source alias, target alias)
        remote_heartbeats_topic(spec.source.alias): {"cleanup.policy": "compact"},
    }


def ensure_internal_topics(spec: MigrationSpec, destination: KafkaCluster) -> list[str]:
    """State, offset-sync and checkpoint topics (one partition each, compacted); idempotent."""
    created = []
    if MigrationStateStore(destination, spec.state_topic_name).ensure_topic():
        created.append(spec.state_topic_name)
    rf = min(3, destination.describe_cluster().broker_count)
    for name, configs in internal_topics(spec).items():
        if destination.create_topic(name, 1, rf, configs):
            created.append(name)
    return created


def compute_group_plan(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster) -> GroupPlan:
    migrated_topics = set(select_topics(spec, source.list_topic_names()))
    # Only the groups the spec selects are read (together): a shared cluster's other groups are listed as not
    # selected by name alone, and reading each of them cost a request per group of the whole cluster.
    all_groups = source.list_group_ids()
    candidates = [g for g in all_groups if spec.selects_group(g)]
    group_topics: dict[str, set[str]] = {g: set() for g in all_groups}
    group_topics.update({g: {t for t, _ in offsets} for g, offsets in source.groups_offsets(candidates).items()})
    existing = set(destination.list_group_ids())
    destination_groups = destination.describe_groups(g for g in candidates if g in existing)
    # The promotions are read after the members were seen, never before: a group's consumers start on the
    # destination only once its promotion is recorded, so any member seen above belongs either to a group this
    # read finds promoted (left alone) or to one not promoted at describe time either (refused, rightly: a
    # consumer started before its promotion would skip or repeat records). Read first, a promotion finishing
    # between the two reads would refuse the group it just moved.
    promoted = recorded_promotions(spec, destination)[0]
    return plan_groups(spec, group_topics, migrated_topics, destination_groups, promoted)


def record_groups(spec: MigrationSpec, plan: GroupPlan, destination: KafkaCluster) -> None:
    plan.raise_if_refused()
    save_migrated_groups(MigrationStateStore(destination, spec.state_topic_name), plan.migrated)
