"""Pre-flight and provisioning of mirror topics and groups; idempotent, safe to retry."""

from __future__ import annotations

from typing import Any

from kafka_ferry.copy.backlog import estimate_before_copy, estimate_lines
from kafka_ferry.core.failures import Permanent
from kafka_ferry.core.flags import parse_bool
from kafka_ferry.core.provisioning_plan import select_topics
from kafka_ferry.core.selection_check import check_selections
from kafka_ferry.core.staged_cutover import check_topic_promotion, validate_selection
from kafka_ferry.core.trigger_form import (
    GROUPS_FIELD,
    PROMOTE,
    PROMOTE_GROUPS,
    PROMOTE_TOPICS,
    ROLLBACK,
    ROLLBACK_PLAN,
    TOPICS_FIELD,
    WAIVE_FIELD,
    check_trigger,
    names,
)
from kafka_ferry.operators.base import DryRunOperator, MigrationOperator
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.promotion.guard import assert_not_promoted
from kafka_ferry.promotion.readiness import refuse_settled_groups_ahead
from kafka_ferry.provision.fences import check_fenceable, has_authorizer, put_fences, wanted_fences
from kafka_ferry.provision.provision import (
    apply_topic_plan,
    compute_group_plan,
    compute_topic_plan,
    ensure_internal_topics,
    internal_topics,
    record_groups,
)
from kafka_ferry.schemas.serialized_fields import decide_from_registry
from kafka_ferry.state.progress import PlannedGroups, migrated_groups, read_progress
from kafka_ferry.state.staged_cutover import promoted_groups, promoted_topics, recorded_promotions
from kafka_ferry.state.time_plans import record_time_plans
from kafka_ferry.state.topic_ownership import record_ownership, record_topics

NO_OP_KEY = "staged_no_op"  # the pre-flight's XCom: every unit the staged mode names is promoted already


class NothingCopiedYet(Permanent, RuntimeError):
    """A promotion of a migration no catch-up run copied: nothing to promote yet (the same run is refused again)."""


class MigrationPreflightOperator(MigrationOperator):
    """Checks the trigger form, connections and clusters and returns the diff provisioning would apply; changes nothing.

    Any refusal (an unreachable cluster, a selection that matches nothing, more destination partitions,
    incompatible cleanup.policy, active destination group) fails this task, so the run stops before the first
    change. A promoted migration refuses here every mode but the rollback ones, naming the rollback (the copy and
    provisioning tasks would refuse it later). The rollback modes check the trigger, connections, tenant, both
    clusters and the state topic, and stop there: provisioning is no part of them, and its plan would refuse what a
    rollback starts from (groups with members on the destination, topics the tenant changed there). A promotion
    (whole or staged) of a migration nothing was copied for yet is refused here, naming catch-up; ``promote-groups``
    and ``promote-topics`` make their tasks' checks here too (``check_staged``), so a refusal or a no-op comes before
    provisioning writes anything.

    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``.
    """

    @fail_fast
    def execute(self, context: Any) -> dict:
        mode = self.check_trigger(context)
        self.check_connections_exist()
        self.check_tenant()  # with a tenants file: only what the spec's tenant is granted
        self.source_cluster.check_reachable()  # no address accepts a connection: one try, naming them
        self.destination_cluster.check_reachable()
        source_info = self.source_cluster.describe_cluster()
        destination_info = self.destination_cluster.describe_cluster()
        state_exists = self.state_store.check_topic()  # one of another shape is refused before any change
        if mode in (ROLLBACK, ROLLBACK_PLAN):
            return {"migration": self.spec.name, "mode": mode, "source_cluster_id": source_info.cluster_id,
                    "destination_cluster_id": destination_info.cluster_id}
        promoting = mode in (PROMOTE, PROMOTE_GROUPS, PROMOTE_TOPICS)
        state = self.state_store.read_all() if state_exists and promoting else {}  # what was copied and promoted
        if state_exists:
            assert_not_promoted(self.state_store, self.spec_path, refused=f"mode {mode!r} is refused")
        if promoting and not (state and read_progress(self.state_store, state)):
            raise NothingCopiedYet(
                f"mode {mode!r} is refused: migration {self.spec.name!r}: nothing was copied yet (no copy progress "
                f"in state topic {self.spec.state_topic_name}), so there is nothing to promote; run mode catch-up "
                f"first (until the lag is small), then mode {mode!r}")
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
        for topic, changes in topic_plan.ownership.get("adopt", {}).items():
            self.log.info("  adopt %s (topics.adopt): %s", topic, ", ".join(changes) or "no config change")
        for topic in topic_plan.ownership.get("adopt_unmatched", []):
            self.log.warning("  topics.adopt names %s, which is no mirror of this migration: ignored", topic)
        for group, topics in diff["groups"]["migrated"].items():
            self.log.info("  group %s on %s", group, ", ".join(topics))
        diff["promoted_topics"] = recorded_promotions(self.spec, self.destination_cluster)[1]
        for group in diff["groups"]["promoted"]:
            self.log.info("  group %s promoted: left to its consumers (no member check, no offsets)", group)
        for topic in diff["promoted_topics"]:
            self.log.info("  topic %s promoted: its copy has ended, left as it is", topic)
        for line in diff["timestamps"]:
            self.log.info("  timestamps %s", line)
        if self.spec.acls.fence:
            diff["fencing"] = "on" if has_authorizer(self.destination_cluster) else "off: no authorizer"
            (self.log.info if diff["fencing"] == "on" else self.log.warning)(
                "  fencing %s (acls.fence)", diff["fencing"])
            if diff["fencing"] == "on":  # FenceRefused (a DENY for User:* needed) stops the run here
                check_fenceable(self.spec, self.source_cluster, self.destination_cluster, self.state_store,
                                sorted(diff["groups"]["migrated"]))
        if self.spec.schema_registry is not None:
            diff["serialized_fields"] = self.serialized_fields()
            for line in diff["serialized_fields"]:
                self.log.info("  registry-serialized %s", line)
            diff["schema_compatibility"] = self.global_compatibility_line()
            self.log.info("  schemas %s", diff["schema_compatibility"])
        topic_plan.raise_if_refused()
        group_plan.raise_if_refused()
        params = context.get("params") or {}
        if mode in (PROMOTE_GROUPS, PROMOTE_TOPICS):  # refused or a no-op here, before provisioning writes
            diff[NO_OP_KEY] = self.check_staged(mode, params, state, group_plan.migrated)
        if mode in (PROMOTE, PROMOTE_GROUPS) and not diff.get(NO_OP_KEY) and not parse_bool(params.get("allow_rewind")):
            # a destination group past a translation the final copy cannot change: refused now, not after the copy
            groups = names(params.get(GROUPS_FIELD)) if mode == PROMOTE_GROUPS else None
            diff["groups_ahead"] = refuse_settled_groups_ahead(self.spec, self.source_cluster,
                                                               self.destination_cluster, self.state_store, mode,
                                                               groups)
            self.log.info("  destination groups: none ahead of the translation (%s)", diff["groups_ahead"])
        # backlog and ETA before the next batch, from sizes alone (the dry run's plan_copy gives the same)
        diff["estimate"] = estimate_before_copy(self.spec, self.source_cluster, self.destination_cluster,
                                                self.state_store)
        for line in estimate_lines(diff["estimate"]):
            self.log.info("  %s", line)
        return {**diff, "mode": mode}

    def check_staged(self, mode: str, params: dict, state: dict, planned: dict[str, list[str]]) -> bool:
        """The checks ``promote_groups`` / ``promote_topics`` make before acting, made here before provisioning
        writes anything (the tasks make them again: a run can race another): unknown names, a topic read by a
        group neither promoted nor waived. True when every name is promoted already: the run is a no-op, and
        ``choose_route`` skips the rest of it.

        The groups this run's provisioning would record (``planned``) count as migrated already."""
        readers = {**migrated_groups(self.state_store, state), **planned} if state else dict(planned)
        done_groups, done_topics = (promoted_groups(self.state_store, state), promoted_topics(self.state_store, state)
                                    ) if state else ([], [])
        if mode == PROMOTE_GROUPS:
            chosen = validate_selection("groups", names(params.get(GROUPS_FIELD)), readers)
            todo = [g for g in chosen if g not in done_groups]
            if not todo:
                self.log.info("group(s) %s promoted already: nothing to do", ", ".join(chosen))
            return not todo
        chosen = validate_selection("topics", names(params.get(TOPICS_FIELD)),
                                    select_topics(self.spec, self.source_cluster.list_topic_names()))
        waived = names(params.get(WAIVE_FIELD))
        if waived:
            validate_selection("waived groups", waived, readers)
        todo = [t for t in chosen if t not in done_topics]
        if not todo:
            self.log.info("topic(s) %s promoted already: nothing to do", ", ".join(chosen))
            return True
        check_topic_promotion(todo, readers, done_groups, waived)
        return False

    def serialized_fields(self) -> list[str]:
        """Per topic, the fields a remap rewrites and the decode check decodes, and why (read-only)."""
        from kafka_ferry.operators.schemas import registry  # the registry client only when the spec has one

        settings = self.spec.schema_registry
        source = registry(settings.source_connection_id)
        try:
            topics = select_topics(self.spec, self.source_cluster.list_topic_names())
            return [d.describe() for d in decide_from_registry(source, settings, topics).values()]
        finally:
            source.close()

    def global_compatibility_line(self) -> str:
        """Both registries' global compatibility, and whether the migration moves it (read only)."""
        from kafka_ferry.core.schema_compat import global_line
        from kafka_ferry.operators.schemas import registry

        settings = self.spec.schema_registry
        source, destination = registry(settings.source_connection_id), registry(settings.destination_connection_id)
        try:
            return global_line(source.global_compatibility(), destination.global_compatibility(),
                               settings.move_global_compatibility)
        finally:
            source.close()
            destination.close()

    def check_trigger(self, context: Any) -> str:
        """The run's mode; refuses (before anything changes) a bad mode, an unconfirmed promote, unknown fields."""
        params = context.get("params") or {}
        dag = context.get("dag")
        conf = getattr(context.get("dag_run"), "conf", None) or {}
        known = dag.params.keys() if dag is not None else params.keys()
        mode = check_trigger(self.spec.name, params, conf.keys(), known)
        self.log.info("run mode: %s", mode)
        return mode


class ProvisionMirrorTopicsOperator(DryRunOperator):
    """Creates or grows destination topics to mirror the selected source topics; `dry_run` only plans.

    :param dry_run: see ``DryRunOperator``: plan and report only, change nothing.
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``.
    """

    @fail_fast
    def execute(self, context: Any) -> dict:
        plan = compute_topic_plan(self.spec, self.source_cluster, self.destination_cluster)
        plan.raise_if_refused()
        if self.is_dry_run:
            self.log.info("dry run: would apply %s", plan.as_dict()["changes"])
            return {"dry_run": True, **plan.as_dict()}
        created_internal = ensure_internal_topics(self.spec, self.destination_cluster)
        self.record_owner()  # with a tenants file: this spec file owns the state topic from now on
        # a promoted mirror keeps the timestamp configs promotion set
        assert_not_promoted(self.state_store, self.spec_path)
        record_ownership(self.spec, plan, self.state_store)  # before creating or adopting: a crash keeps it owned
        record_time_plans(self.spec, plan, self.destination_cluster)
        done = apply_topic_plan(plan, self.destination_cluster)
        record_topics(self.spec, plan, self.destination_cluster)
        return {"dry_run": False, "applied": done, "internal_topics_created": created_internal}


class ProvisionMirrorGroupsOperator(DryRunOperator):
    """Resolves the groups to migrate and records them in the migration's state topic; `dry_run` only plans
    (the groups, and the fences it would put).

    :param dry_run: see ``DryRunOperator``: plan and report only, change nothing.
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``.
    """

    @fail_fast
    def execute(self, context: Any) -> dict:
        plan = compute_group_plan(self.spec, self.source_cluster, self.destination_cluster)
        plan.raise_if_refused()
        if self.is_dry_run:
            return {"dry_run": True, **plan.as_dict(), **self.planned_fences(plan)}
        ensure_internal_topics(self.spec, self.destination_cluster)
        record_groups(self.spec, plan, self.destination_cluster)
        if not self.spec.acls.fence:
            return plan.as_dict()
        fences = put_fences(self.spec, self.source_cluster, self.destination_cluster, self.state_store)
        return {**plan.as_dict(), "fences": fences}

    def planned_fences(self, plan) -> dict:
        """The fences provisioning would put, read only (the state as it would be once the groups are recorded)."""
        if not self.spec.acls.fence:
            return {}
        if not has_authorizer(self.destination_cluster):
            return {"fences": "off: no authorizer"}
        wanted = wanted_fences(self.spec, self.source_cluster, self.destination_cluster,
                               PlannedGroups(self.state_store, plan.migrated))
        for key, entries in wanted.items():
            self.log.info("dry run: would fence %s: %s", key, "; ".join(e.describe() for e in entries))
        return {"fences": {key: [e.describe() for e in entries] for key, entries in wanted.items()}}
