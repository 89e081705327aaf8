"""The pre-flight's reach and diff, free of Airflow: the pre-flight task (``operators.provision``) and the
``kafka-ferry check`` command (``cli.checks``) call the same functions, so both reach a cluster, refuse a selection
and name what it selects the same way. Reads only: nothing here changes a cluster, a registry or the state topic.

In the task's order: ``reach`` both clusters (one try each: an address nobody answers on fails at once), the mode's
refusals (``promotion.mode_checks.check_state``), ``plan_diff`` (the selections, the topic and group plans as the
provisioning would apply them; ``diff_lines`` as the task logs them), ``check_fencing``, then, for the staged
modes, ``promotion.mode_checks.check_staged``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kafka_ferry.core.common.cluster_model import ClusterInfo
from kafka_ferry.core.provisioning.provisioning_plan import GroupPlan, TopicPlan, select_topics
from kafka_ferry.core.specs.selection_check import check_selections
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.provision.fences import check_fenceable, has_authorizer
from kafka_ferry.provision.provision import compute_group_plan, compute_topic_plan, internal_topics
from kafka_ferry.state.staged_cutover import recorded_promotions
from kafka_ferry.state.store import MigrationStateStore

log = logging.getLogger(__name__)


def reach(*clusters: KafkaCluster) -> list[ClusterInfo]:
    """Each cluster's id and broker count, once every one was found to answer (``check_reachable``: one try, naming
    the addresses, instead of each client call waiting out its timeout on every retry)."""
    for cluster in clusters:
        cluster.check_reachable()
    return [cluster.describe_cluster() for cluster in clusters]


def selected(spec: MigrationSpec, source: KafkaCluster) -> tuple[list[str], list[str]]:
    """The source topics and groups the spec selects now; a selection that matches nothing is refused, naming the
    closest names (``core.specs.selection_check``)."""
    topics, groups = source.list_topic_names(), source.list_group_ids()
    check_selections(spec, topics, groups)
    return select_topics(spec, topics), [g for g in groups if spec.selects_group(g)]


def plan_diff(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster, store: MigrationStateStore,
              infos: list[ClusterInfo]) -> tuple[dict[str, Any], TopicPlan, GroupPlan]:
    """What provisioning would apply (the diff the task returns and logs) and its two plans, not yet refused:
    the caller logs the diff first, then ``raise_if_refused`` each plan."""
    selected(spec, source)
    topic_plan = compute_topic_plan(spec, source, destination)
    group_plan = compute_group_plan(spec, source, destination)
    diff: dict[str, Any] = {
        "migration": spec.name,
        "source_cluster_id": infos[0].cluster_id,
        "destination_cluster_id": infos[1].cluster_id,
        "topics": topic_plan.as_dict(),
        "groups": group_plan.as_dict(),
        "internal_topics": sorted(internal_topics(spec)) + [spec.state_topic_name],
        "timestamps": topic_plan.timestamp_lines(),
    }
    diff["promoted_topics"] = recorded_promotions(spec, destination)[1]
    if spec.acls.fence:
        diff["fencing"] = "on" if has_authorizer(destination) else "off: no authorizer"
    return diff, topic_plan, group_plan


def check_fencing(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster, store: MigrationStateStore,
                  diff: Mapping[str, Any]) -> None:
    """With fencing on, refuse (``FenceRefused``) a fence that would need a DENY for User:*; after the diff is
    logged, so the refusal comes with the plan it refuses."""
    if diff.get("fencing") == "on":
        check_fenceable(spec, source, destination, store, sorted(diff["groups"]["migrated"]))


def diff_lines(diff: Mapping[str, Any], topic_plan: TopicPlan) -> list[tuple[int, str]]:
    """The diff as the task logs it: (logging level, line), one line per change."""
    lines = [(logging.INFO, f"pre-flight diff for {diff['migration']}:")]
    lines += [(logging.INFO, f"  unit {line}") for line in diff.get("applications", [])]
    lines += [(logging.INFO, f"  topic {line}") for line in diff["topics"]["changes"]]
    lines += [(logging.INFO, f"  adopt {topic} (topics.adopt): {', '.join(changes) or 'no config change'}")
              for topic, changes in topic_plan.ownership.get("adopt", {}).items()]
    lines += [(logging.WARNING, f"  topics.adopt names {topic}, which is no mirror of this migration: ignored")
              for topic in topic_plan.ownership.get("adopt_unmatched", [])]
    lines += [(logging.INFO, f"  group {group} on {', '.join(topics)}") for group, topics in
              diff["groups"]["migrated"].items()]
    lines += [(logging.INFO, f"  group {group} promoted: left to its consumers (no member check, no offsets)")
              for group in diff["groups"]["promoted"]]
    lines += [(logging.INFO, f"  topic {topic} promoted: its copy has ended, left as it is")
              for topic in diff["promoted_topics"]]
    lines += [(logging.INFO, f"  timestamps {line}") for line in diff["timestamps"]]
    if "fencing" in diff:
        lines.append((logging.INFO if diff["fencing"] == "on" else logging.WARNING,
                      f"  fencing {diff['fencing']} (acls.fence)"))
    return lines
