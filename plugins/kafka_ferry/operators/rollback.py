"""The rollback as a task: ``mode: rollback`` runs ``promotion.rollback.RollbackRunner`` (resuming the steps already
done); ``mode: rollback-plan`` (a dry run) returns what it would copy back and where each group would resume. With
names in the form's *Topics* field, only those topics of a staged cutover go back, with the groups reading them
(``promotion.topic_rollback``); with names in its *Groups* field, only those groups (``promotion.group_rollback``).
Every group named, alone or with topics, is checked (``group_rollback.check_groups``) before the first topic or group
changes, and the dry runs refuse it with the same message: a typo in *Groups* never leaves half a rollback done.

Why one task for all steps: unlike the promotion there is no sensor between them (the quiesce step waits its own
window), and a retry resumes from the state topic, not XCom.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kafka_ferry.copy.plan import work_dir
from kafka_ferry.core.cutover.authority import DONE, act_line
from kafka_ferry.core.specs.trigger_form import GROUPS_FIELD, ROLLBACK, TOPICS_FIELD, names
from kafka_ferry.operators.base import ActStart, DryRunOperator
from kafka_ferry.operators.evidence import write_evidence
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.operators.schemas import registry
from kafka_ferry.promotion.evidence import rollback_files
from kafka_ferry.promotion.group_rollback import check_groups, group_rollback_plan, rollback_group
from kafka_ferry.promotion.rollback import ROLLBACK_TABLE, RollbackRunner
from kafka_ferry.promotion.topic_rollback import TOPIC_ROLLBACK_TABLE, rollback_topics, topic_rollback_plan
from kafka_ferry.registry.client import SchemaRegistry
from kafka_ferry.reports.publish import publish_rollback_run


class RollbackMigrationOperator(DryRunOperator):
    """Rolls a promoted migration back to the source, or (``dry_run``) shows the rollback plan and changes nothing.

    :param dry_run: see ``DryRunOperator``: return the rollback plan, change nothing.
    :param work_dir: where the rollback writes its report; default: the migration's work dir.
    :param kwargs: passed to ``DryRunOperator`` (``spec_path``) and ``BaseOperator``.
    """

    ui_color = "#d8e8f8"
    # the whole rollback, or with *Topics* the topics' (tests/unit/airflow checks the DAG runs every table)
    step_tables: ClassVar[tuple[str, ...]] = (ROLLBACK_TABLE.kind, TOPIC_ROLLBACK_TABLE.kind)

    def __init__(self, *, work_dir: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.work_dir = work_dir

    @fail_fast
    def execute(self, context: Any) -> dict:
        settings = self.spec.schema_registry
        # remap mode: the destination registry names (subject/version) any id the copy-back cannot map back
        destination_registry = (registry(settings.destination_connection_id)
                                 if settings is not None and settings.mode == "remap" else None)
        try:
            if self.is_dry_run:
                return self._execute(context, destination_registry)
            params = context.get("params") or {}
            if not (names(params.get(GROUPS_FIELD)) or names(params.get(TOPICS_FIELD))):
                # a whole rollback of a migration not promoted as a whole is refused before the act is recorded:
                # a refusal writes nothing, not even who tried (the run's log and page say that); one rolled back
                # already is a no-op, which records nothing either
                runner = self._runner(destination_registry)
                runner.check_promoted()
                if not runner.is_promoted():
                    return self._execute(context, destination_registry)
            # who did it: recorded by the work after its last refusal (unknown or unpromoted names, rights, quiet
            # window), before its first change; a refusal or a no-op records nothing
            with self.acting(context, ROLLBACK) as self._start:
                result = self._execute(context, destination_registry, self._start)
            if self._start.record is not None:
                self.log.info("rollback recorded: %s", act_line(self._start.record))  # done: _publish says so
            return result
        finally:
            if destination_registry is not None:
                destination_registry.close()

    def _runner(self, destination_registry: SchemaRegistry | None) -> RollbackRunner:
        return RollbackRunner(self.spec, self.source_cluster, self.destination_cluster, self.state_store,
                              work_dir=self.work_dir, quiesce_window_s=self.spec.promotion.quiesce_window_seconds,
                              versions_of_id=destination_registry.versions_of_id if destination_registry else None)

    def _execute(self, context: Any, destination_registry: SchemaRegistry | None,
                 start: ActStart | None = None) -> dict:
        """The rollback (or its plan); ``start``: the act's start, called before the first change."""
        runner = self._runner(destination_registry)
        params = context.get("params") or {}
        groups, topics = names(params.get(GROUPS_FIELD)), names(params.get(TOPICS_FIELD))
        if topics:
            return self._topics(context, topics, groups, destination_registry, start)
        if groups:
            return self._groups(context, groups, start)
        if self.is_dry_run:
            runner.check_promoted()  # refused as the rollback refuses: the plan of no rollback is no empty plan
            plan = runner.plan()
            self.log.info("rollback plan of %s: %d record(s) to copy back", self.spec.name, plan["records"])
            for r in plan["copy_back"]:
                self.log.info("  copy back %s-%d [%d, %d): %d record(s); %s", r["destination_topic"], r["partition"],
                              r["start"], r["end"], r["records"], r["reason"])
            self._log_groups(plan)
            self._log_unmapped(plan)
            self._log_acls(plan)
            self._publish(context, plan)
            return plan
        report = runner.run(before_change=start)
        self.log.info("rollback report: %s (status %s)", report["report_path"], report["status"])
        self._publish(context, report)
        return {k: v for k, v in report.items() if k != "groups"}

    def _groups(self, context: Any, groups: list[str], start: ActStart | None = None) -> dict:
        """A staged cutover's groups: their rollback, or (dry run) where each would resume on the source."""
        args = (self.spec, self.source_cluster, self.destination_cluster, self.state_store)
        if self.is_dry_run:  # refused as the run below refuses, else only the groups it would commit
            plan = {"migration": self.spec.name, "records": 0, "copy_back": [],
                    "note": "groups of a staged cutover: nothing is copied back (producers write to the source)",
                    **group_rollback_plan(*args, groups)}
            self._log_groups(plan)
            self._log_acls(plan)
            self._publish(context, plan)
            return plan
        # every name checked before the first group is committed: a typo after a good name refuses the run, not
        # half of it
        check_groups(self.spec, self.source_cluster, self.state_store, groups)
        done = {g: rollback_group(*args, g, before_change=start) for g in groups}
        report = {"migration": self.spec.name, "status": "rolled-back",
                  "groups": {g: r.get("offsets", []) for g, r in done.items()}}
        self._publish(context, {**report, "status": "groups rolled back"})
        return report

    def _topics(self, context: Any, topics: list[str], groups: list[str],
                destination_registry: SchemaRegistry | None, start: ActStart | None = None) -> dict:
        """A staged cutover's topics (validated in ``topic_rollback.check_topics``), the groups reading them going
        along, then any other group named: their rollback, or (dry run) its plan."""
        args = (self.spec, self.source_cluster, self.destination_cluster, self.state_store)
        versions_of_id = destination_registry.versions_of_id if destination_registry else None
        if self.is_dry_run:
            plan = topic_rollback_plan(*args, topics, groups, versions_of_id=versions_of_id)
            self.log.info("rollback plan of topic(s) %s: %d record(s) to copy back", ", ".join(topics),
                          plan["records"])
            self._log_groups(plan)
            self._log_unmapped(plan)
            self._log_acls(plan)
            self._publish(context, plan)
            return plan
        # the other groups named are rolled back after the topics: refused now, before the topics change anything
        # (the topics they read are going back in this run, so reading one is no refusal)
        check_groups(self.spec, self.source_cluster, self.state_store, groups, with_topics=topics)
        done = rollback_topics(*args, topics, quiesce_window_s=self.spec.promotion.quiesce_window_seconds,
                               versions_of_id=versions_of_id, before_change=start)
        went = {g for r in done.values() for g in r.get("groups", [])}
        rolled = {g: rollback_group(*args, g, before_change=start) for g in groups if g not in went}
        along = {g: rows for r in done.values()
                 for g, rows in (((r.get("steps") or {}).get("groups") or {}).get("summary") or {})
                 .get("rolled_back", {}).items()}  # the groups reading the topics: where each resumes on the source
        report = {"migration": self.spec.name, "status": "rolled-back", "topics": done,
                  "groups": {**along, **{g: r.get("offsets", []) for g, r in rolled.items()}}}
        self._publish(context, {**report, "status": "topics rolled back"})
        return report

    def _log_groups(self, plan: dict) -> None:
        for group, rows in plan.get("groups", {}).items():
            for r in rows:
                self.log.info("  group %s %s-%d@%d -> %s-%d@%d [%s] %s", group, r["destination_topic"],
                              r["partition"], r["destination_offset"], r["source_topic"], r["partition"],
                              r["source_offset"], r["method"], r["reason"])
        for group in plan.get("rolled_back_already", []):
            self.log.info("  group %s: rolled back already, nothing to do", group)

    def _log_unmapped(self, plan: dict) -> None:
        for row in plan.get("schema_ids", {}).get("unmapped_ids", []):
            self.log.warning("  destination schema id %d (%s): %d record(s), first %s; a rollback would refuse",
                             row["schema_id"], row["subject_versions"], row["records"], row["first_record"])

    def _log_acls(self, plan: dict) -> None:
        """The ACLs the rollback needs on the source (granted for it, not in the catch-up's minimum), and those the
        source's authorizer says are missing now."""
        acls = plan.get("acls") or {}
        for line in acls.get("needed", []):
            self.log.info("  needs %s", line)
        for line in acls.get("missing", []):
            self.log.warning("  missing now (grant before the rollback): %s", line)

    def _publish(self, context: Any, report: dict) -> None:
        state = self.state_store.read_all()  # promoted / rolled back per group and topic, as it stands now
        start = getattr(self, "_start", None)  # who did it (a rollback that changed something), shown on its page
        act = None
        evidence = None
        if start is not None and start.record is not None and not self.is_dry_run:  # its last step: the act is done
            act = start.record = self.record_act(context, ROLLBACK, DONE)
            evidence = write_evidence(self, context, ROLLBACK, report, act, rollback_files)
        page = publish_rollback_run(self.spec, work_dir(self.spec.name), context.get("run_id") or self.task_id,
                                    {**report, "act": act, **({"evidence": evidence} if evidence else {})}
                                    if act else report, state)
        self.log.info("run report: %s", page)
