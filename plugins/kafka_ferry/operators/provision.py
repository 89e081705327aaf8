"""Pre-flight and provisioning of mirror topics and groups; idempotent, safe to retry."""

from __future__ import annotations

from typing import Any

from kafka_ferry.copy.backlog import estimate_before_copy, estimate_lines
from kafka_ferry.core.common.flags import parse_bool
from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.specs.trigger_form import (
    DRY_RUN,
    GROUPS_FIELD,
    PROMOTE,
    PROMOTE_GROUPS,
    PROMOTE_TOPICS,
    ROLLBACK,
    ROLLBACK_PLAN,
    check_trigger,
    names,
)
from kafka_ferry.operators.base import AUTHORITY_KEY, DryRunOperator, MigrationOperator
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.promotion.guard import assert_not_promoted
from kafka_ferry.promotion.mode_checks import check_staged, check_state
from kafka_ferry.promotion.readiness import refuse_settled_groups_ahead
from kafka_ferry.promotion.units import migration_units
from kafka_ferry.provision.fences import has_authorizer, put_fences, wanted_fences
from kafka_ferry.provision.preflight import check_fencing, diff_lines, plan_diff, reach
from kafka_ferry.provision.provision import (
    apply_topic_plan,
    compute_group_plan,
    compute_topic_plan,
    ensure_internal_topics,
    record_groups,
)
from kafka_ferry.provision.streams_apps import check_applications
from kafka_ferry.schemas.serialized_fields import decide_from_registry
from kafka_ferry.state.progress import PlannedGroups
from kafka_ferry.state.time_plans import record_time_plans
from kafka_ferry.state.topic_ownership import record_ownership, record_topics

UNIT_MODES = (DRY_RUN, PROMOTE_GROUPS, PROMOTE_TOPICS)  # the modes that read and show the coupled units
NO_OP_KEY = "staged_no_op"  # the pre-flight's XCom: every unit the staged mode names is promoted already


class MigrationPreflightOperator(MigrationOperator):
    """Checks the trigger form, connections and clusters and returns the diff provisioning would apply; changes nothing.
    The checks and the diff are ``provision.preflight``'s (which ``kafka-ferry check`` shares) and
    ``promotion.mode_checks``'; this task adds the Airflow side: the trigger form, the connections, the tenant,
    the registries' lines and the estimate.

    Any refusal (an unreachable cluster, a selection that matches nothing, more destination partitions,
    incompatible cleanup.policy, active destination group) fails this task, so the run stops before the first
    change. A promoted migration refuses here every mode but the rollback ones, naming the rollback (the copy and
    provisioning tasks would refuse it later). The rollback modes check the trigger, connections, tenant, both
    clusters and the state topic, and stop there: provisioning is no part of them, and its plan would refuse what a
    rollback starts from (groups with members on the destination, topics the tenant changed there). A cutover mode
    (promote, promote-groups, promote-topics, rollback) is refused first when the tenant's promoters do not list
    the run's triggering user, or no person triggered it (``check_authority``). A promotion
    (whole or staged) of a migration nothing was copied for yet is refused here, naming catch-up; ``promote-groups``
    and ``promote-topics`` make their tasks' checks here too (``promotion.mode_checks``), so a refusal or a no-op
    comes before provisioning writes anything.

    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``.
    """

    @fail_fast
    def execute(self, context: Any) -> dict:
        mode = self.check_trigger(context)
        authority = self.check_authority(context, mode)  # who may cut over: refused here, naming user and list
        self.check_connections_exist()
        self.check_tenant()  # with a tenants file: only what the spec's tenant is granted
        infos = reach(self.source_cluster, self.destination_cluster)  # one try when no address answers
        rollback = mode in (ROLLBACK, ROLLBACK_PLAN)
        checked = check_state(self.spec, self.state_store, self.spec_path, mode, rollback)
        if rollback:
            return {"migration": self.spec.name, "mode": mode, "source_cluster_id": infos[0].cluster_id,
                    "destination_cluster_id": infos[1].cluster_id, AUTHORITY_KEY: authority}
        applications = check_applications(self.spec, self.source_cluster)  # refuses a selection splitting one
        diff, topic_plan, group_plan = plan_diff(self.spec, self.source_cluster, self.destination_cluster,
                                                 self.state_store, infos)
        diff["applications"] = [a.describe() for a in applications]
        for level, line in diff_lines(diff, topic_plan):
            self.log.log(level, "%s", line)
        check_fencing(self.spec, self.source_cluster, self.destination_cluster, self.state_store, diff)
        if self.spec.schema_registry is not None:
            diff["serialized_fields"] = self.serialized_fields()
            for line in diff["serialized_fields"]:
                self.log.info("  registry-serialized %s", line)
            diff["schema_compatibility"] = self.global_compatibility_line()
            self.log.info("  schemas %s", diff["schema_compatibility"])
        units = None
        if mode in UNIT_MODES:  # the coupled units a staged step may not split, shown by the dry run
            units = migration_units(self.spec, self.source_cluster,
                                    select_topics(self.spec, self.source_cluster.list_topic_names()),
                                    {*group_plan.migrated, *diff["groups"]["promoted"]}, applications)
            diff["coupled_units"] = units.as_dict()
            for line in units.lines():
                self.log.info("  coupling: %s", line)
        topic_plan.raise_if_refused()
        group_plan.raise_if_refused()
        params = context.get("params") or {}
        if mode in (PROMOTE_GROUPS, PROMOTE_TOPICS):  # refused or a no-op here, before provisioning writes
            diff[NO_OP_KEY] = check_staged(self.spec, self.source_cluster, self.state_store, mode, params,
                                           checked.state, group_plan.migrated, units)
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
        return {**diff, "mode": mode, AUTHORITY_KEY: authority}

    def serialized_fields(self) -> list[str]:
        """Per topic, the fields a remap rewrites and the decode check decodes, and why (read-only)."""
        from kafka_ferry.operators.schemas import registry  # the registry client only when the spec has one

        settings = self.spec.schema_registry
        assert settings is not None  # asked only for a spec with a registry (execute)
        source = registry(settings.source_connection_id)
        try:
            topics = select_topics(self.spec, self.source_cluster.list_topic_names())
            return [d.describe() for d in decide_from_registry(source, settings, topics).values()]
        finally:
            source.close()

    def global_compatibility_line(self) -> str:
        """Both registries' global compatibility, and whether the migration moves it (read only)."""
        from kafka_ferry.core.schemas.schema_compat import global_line
        from kafka_ferry.operators.schemas import registry

        settings = self.spec.schema_registry
        assert settings is not None  # asked only for a spec with a registry (execute)
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
