"""Pre-flight and provisioning of mirror topics and groups; idempotent, safe to retry."""

from __future__ import annotations

from typing import Any

from kafka_ferry.core.flags import parse_bool
from kafka_ferry.core.selection_check import check_selections
from kafka_ferry.core.trigger_form import check_trigger
from kafka_ferry.operators.base import MigrationOperator
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.promotion.guard import assert_not_promoted
from kafka_ferry.stages.fences import has_authorizer, put_fences
from kafka_ferry.stages.provision import (
    apply_topic_plan,
    compute_group_plan,
    compute_topic_plan,
    ensure_internal_topics,
    internal_topics,
    record_groups,
    record_time_plans,
    record_topics,
)


class MigrationPreflightOperator(MigrationOperator):
    """Checks the trigger form, connections and clusters and returns the diff provisioning would apply; changes nothing.

    Any refusal (an unreachable cluster, a selection that matches nothing, more destination partitions,
    incompatible cleanup.policy, active destination group) fails this task, so the run stops before the first
    change.
    """

    @fail_fast
    def execute(self, context: Any) -> dict:
        mode = self.check_trigger(context)
        self.check_connections_exist()
        self.source_cluster.check_reachable()
        self.destination_cluster.check_reachable()
        source_info = self.source_cluster.describe_cluster()
        destination_info = self.destination_cluster.describe_cluster()
        check_selections(self.spec, self.source_cluster.list_topic_names(), self.source_cluster.list_group_ids())
        topic_plan = compute_topic_plan(self.spec, self.source_cluster, self.destination_cluster)
        group_plan = compute_group_plan(self.spec, self.source_cluster, self.destination_cluster)
        diff = {
            "migration": self.spec.name,
            "source_cluster_id": source_info.cluster_id,
            "destination_cluster_id": destination_info.cluster_id,
            "topics": topic_plan.as_dict(),
            "groups": group_plan.as_dict(),
            "internal_topics": sorted(internal_topics(self.spec)) + [self.spec.state_topic_name],
            "timestamps": topic_plan.timestamp_lines(),
        }
        self.log.info("pre-flight diff for %s:", self.spec.name)
        for line in diff["topics"]["changes"]:
            self.log.info("  topic %s", line)
        for group, topics in diff["groups"]["migrated"].items():
            self.log.info("  group %s on %s", group, ", ".join(topics))
        for line in diff["timestamps"]:
            self.log.info("  timestamps %s", line)
        if self.spec.acls.fence:
            diff["fencing"] = "on" if has_authorizer(self.destination_cluster) else "off: no authorizer"
            (self.log.info if diff["fencing"] == "on" else self.log.warning)(
                "  fencing %s (acls.fence)", diff["fencing"])
        topic_plan.raise_if_refused()
        group_plan.raise_if_refused()
        return {**diff, "mode": mode}

    def check_trigger(self, context: Any) -> str:
        """The run's mode; refuses (before anything changes) a bad mode, an unconfirmed promote, unknown fields."""
        params = context.get("params") or {}
        dag = context.get("dag")
        conf = getattr(context.get("dag_run"), "conf", None) or {}
        known = dag.params.keys() if dag is not None else params.keys()
        mode = check_trigger(self.spec.name, params, conf.keys(), known)
        self.log.info("run mode: %s", mode)
        return mode


class ProvisionMirrorTopicsOperator(MigrationOperator):
    """Creates or grows destination topics to mirror the selected source topics; `dry_run` only plans."""

    template_fields = (*MigrationOperator.template_fields, "dry_run")

    def __init__(self, *, dry_run: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.dry_run = dry_run

    @fail_fast
    def execute(self, context: Any) -> dict:
        plan = compute_topic_plan(self.spec, self.source_cluster, self.destination_cluster)
        plan.raise_if_refused()
        if parse_bool(self.dry_run):
            self.log.info("dry run: would apply %s", plan.as_dict()["changes"])
            return {"dry_run": True, **plan.as_dict()}
        created_internal = ensure_internal_topics(self.spec, self.destination_cluster)
        # a promoted mirror keeps the timestamp configs promotion set
        assert_not_promoted(self.state_store, self.spec_path)
        record_time_plans(self.spec, plan, self.destination_cluster)
        done = apply_topic_plan(plan, self.destination_cluster)
        record_topics(self.spec, plan, self.destination_cluster)
        return {"dry_run": False, "applied": done, "internal_topics_created": created_internal}


class ProvisionMirrorGroupsOperator(MigrationOperator):
    """Resolves the groups to migrate and records them in the migration's state topic."""

    @fail_fast
    def execute(self, context: Any) -> dict:
        plan = compute_group_plan(self.spec, self.source_cluster, self.destination_cluster)
        plan.raise_if_refused()
        ensure_internal_topics(self.spec, self.destination_cluster)
        record_groups(self.spec, plan, self.destination_cluster)
        if not self.spec.acls.fence:
            return plan.as_dict()
        fences = put_fences(self.spec, self.source_cluster, self.destination_cluster, self.state_store)
        return {**plan.as_dict(), "fences": fences}
