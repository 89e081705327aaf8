"""Pre-flight and provisioning of mirror topics and groups; idempotent, safe to retry."""

from __future__ import annotations

from typing import Any

from kafka_ferry.io.provisioning import (
    apply_topic_plan,
    compute_group_plan,
    compute_topic_plan,
    ensure_internal_topics,
    internal_topics,
    record_groups,
    record_topics,
)
from kafka_ferry.operators.base import MigrationOperator


class MigrationPreflightOperator(MigrationOperator):
    """Checks connections and clusters and returns the diff provisioning would apply; changes nothing.

    Any refusal (more destination partitions, incompatible cleanup.policy, active destination group)
    fails this task, so the run stops before the first change.
    """

    def execute(self, context: Any) -> dict:
        self.check_connections_exist()
        source_info = self.source_hook.describe_cluster()
        destination_info = self.destination_hook.describe_cluster()
        topic_plan = compute_topic_plan(self.spec, self.source_hook, self.destination_hook)
        group_plan = compute_group_plan(self.spec, self.source_hook, self.destination_hook)
        diff = {
            "migration": self.spec.name,
            "source_cluster_id": source_info.cluster_id,
            "destination_cluster_id": destination_info.cluster_id,
            "topics": topic_plan.as_dict(),
            "groups": group_plan.as_dict(),
            "internal_topics": sorted(internal_topics(self.spec)) + [self.spec.state_topic_name],
        }
        self.log.info("pre-flight diff for %s:", self.spec.name)
        for line in diff["topics"]["changes"]:
            self.log.info("  topic %s", line)
        for group, topics in diff["groups"]["migrated"].items():
            self.log.info("  group %s on %s", group, ", ".join(topics))
        topic_plan.raise_if_refused()
        group_plan.raise_if_refused()
        return diff


class ProvisionMirrorTopicsOperator(MigrationOperator):
    """Creates or grows destination topics to mirror the selected source topics; `dry_run` only plans."""

    template_fields = (*MigrationOperator.template_fields, "dry_run")

    def __init__(self, *, dry_run: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.dry_run = dry_run

    def execute(self, context: Any) -> dict:
        plan = compute_topic_plan(self.spec, self.source_hook, self.destination_hook)
        plan.raise_if_refused()
        if self.dry_run in (True, "True", "true"):
            self.log.info("dry run: would apply %s", plan.as_dict()["changes"])
            return {"dry_run": True, **plan.as_dict()}
        created_internal = ensure_internal_topics(self.spec, self.destination_hook)
        done = apply_topic_plan(plan, self.destination_hook)
        record_topics(self.spec, plan, self.destination_hook)
        return {"dry_run": False, "applied": done, "internal_topics_created": created_internal}


class ProvisionMirrorGroupsOperator(MigrationOperator):
    """Resolves the groups to migrate and records them in the migration's state topic."""

    def execute(self, context: Any) -> dict:
        plan = compute_group_plan(self.spec, self.source_hook, self.destination_hook)
        plan.raise_if_refused()
        ensure_internal_topics(self.spec, self.destination_hook)
        record_groups(self.spec, plan, self.destination_hook)
        return plan.as_dict()
