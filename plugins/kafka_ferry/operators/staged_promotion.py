"""Staged cutover tasks: promote the groups, or the topics, chosen in the trigger form (never scheduled).

Thin over ``promotion.group`` / ``promotion.topic``: the names come from the run's params (checked by
the pre-flight), the work resumes from the state topic, and the final copies run in this task on threads (no JVM start
inside the window, as the whole-migration promotion's in-process final copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from kafka_ferry.airflow_native.announce import TopicLineage, announce_promotion
from kafka_ferry.copy.catch_up import threads_engine
from kafka_ferry.copy.plan import work_dir
from kafka_ferry.core.common.flags import parse_bool
from kafka_ferry.core.cutover.authority import DONE
from kafka_ferry.core.cutover.staged_cutover import validate_selection
from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.specs.trigger_form import (
    GROUPS_FIELD,
    PROMOTE_GROUPS,
    PROMOTE_TOPICS,
    TOPICS_FIELD,
    WAIVE_FIELD,
    names,
)
from kafka_ferry.operators.base import ActStart, MigrationOperator
from kafka_ferry.operators.evidence import write_evidence
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.promotion.evidence import staged_files
from kafka_ferry.promotion.group import GROUP_TABLE, promote_group
from kafka_ferry.promotion.group_readiness import ready_groups
from kafka_ferry.promotion.topic import TOPIC_TABLE, promote_topics
from kafka_ferry.promotion.units import check_staged_units, migration_units
from kafka_ferry.provision.streams_apps import source_applications
from kafka_ferry.reports.publish import publish_staged_run
from kafka_ferry.state.progress import migrated_groups
from kafka_ferry.state.staged_cutover import promoted_groups, promoted_topics
from kafka_ferry.state.topic_ownership import mirrored_topics


class StagedPromotionOperator(MigrationOperator):
    """What both staged tasks share: the run's page of where every group and topic stands.

    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``.
    """

    ui_color = "#f8e0c8"

    def check_units(self, step: str, topics: Sequence[str] = (), groups: Sequence[str] = ()) -> None:
        """The pre-flight's unit check again, on the names not promoted yet (a run can race another): a step that
        would split a coupled unit the spec does not accept splitting is refused before this task changes anything."""
        state = self.state_store.read_all()
        done_topics, done_groups = promoted_topics(self.state_store, state), promoted_groups(self.state_store, state)
        topics, groups = [t for t in topics if t not in done_topics], [g for g in groups if g not in done_groups]
        if not (topics or groups):
            return
        selected = select_topics(self.spec, self.source_cluster.list_topic_names())
        units = migration_units(self.spec, self.source_cluster, selected, migrated_groups(self.state_store, state),
                                source_applications(self.spec, self.source_cluster))
        check_staged_units(self.spec, units, step, topics, groups, done_topics, done_groups)

    def publish(self, context: Any, this_run: list[str], act: dict | None = None) -> str:
        evidence = None
        if act is not None and act.get("status") == DONE and this_run:  # the step's evidence, once it is done
            evidence = write_evidence(self, context, str(act["action"]), {"action": act["action"],
                                                                         "this_run": this_run}, act, staged_files)
        state = self.state_store.read_all()
        page = publish_staged_run(self.spec, work_dir(self.spec.name), context.get("run_id") or self.task_id, state,
                                  sorted(migrated_groups(self.state_store, state)),
                                  sorted(mirrored_topics(self.state_store, state)), this_run, act=act,
                                  evidence=evidence)
        self.log.info("run report: %s", page)
        return str(page)


class PromoteGroupsOperator(StagedPromotionOperator):
    """Promotes each group named in the form's ``groups`` field, in order; returns each group's record.

    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``. The groups come from the
        run form (``params``), not from arguments.
    """

    step_tables: ClassVar[tuple[str, ...]] = (GROUP_TABLE.kind,)  # every step, per group (tests/unit/airflow)

    @fail_fast
    def execute(self, context: Any) -> dict:
        params = context["params"]
        groups = validate_selection("groups", names(params.get(GROUPS_FIELD)), migrated_groups(self.state_store))
        self.check_units(PROMOTE_GROUPS, groups=groups)
        with self.acting(context, PROMOTE_GROUPS) as start:  # who did it: after every refusal, before a change
            return self._promote(context, groups, start)

    def _promote(self, context: Any, groups: list[str], start: ActStart) -> dict:
        params = context["params"]
        for line in ready_groups(self.source_cluster, self.state_store, quiet_ms=0):
            self.log.info("group %s: %s (%s)", line.group, "ready" if line.ready else "not ready", line.reason)
        run_id = context.get("run_id") or "promote-groups"
        out = {}
        for group in groups:
            record = promote_group(self.spec, self.source_cluster, self.destination_cluster, self.state_store, group,
                                   run_id, threads_engine(), allow_rewind=parse_bool(params.get("allow_rewind")),
                                   before_change=start)
            self.log.info("group %s promoted by run %s at %s ms", group, record.run_id, record.promoted_at_ms)
            out[group] = {"run_id": record.run_id, "promoted_at_ms": record.promoted_at_ms}
        # every group promoted already: a no-op, nothing recorded
        act = self.record_act(context, PROMOTE_GROUPS, DONE) if start.record is not None else None
        return {**out, "run_report": self.publish(context, groups, act)}


class PromoteTopicsOperator(TopicLineage, StagedPromotionOperator):
    """Promotes the topics named in the form's ``topics`` field, with the groups waived in ``waive_groups``.

    Each promoted topic gets a "promoted" asset event through the task's ``outlets`` (the migration's promoted
    asset alias), and the task's OpenLineage names the topics it promoted.

    :param quiet_window_s: seconds the promoted topics' source end offsets must stay unchanged before they are
        promoted.
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``. The topics and waived
        groups come from the run form (``params``).
    """

    step_tables: ClassVar[tuple[str, ...]] = (TOPIC_TABLE.kind,)  # every step, per topic (tests/unit/airflow)

    def __init__(self, *, quiet_window_s: float = 10.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.quiet_window_s = quiet_window_s

    @fail_fast
    def execute(self, context: Any) -> dict:
        params = context["params"]
        self.check_units(PROMOTE_TOPICS, topics=names(params.get(TOPICS_FIELD)))  # refused before the act
        with self.acting(context, PROMOTE_TOPICS) as start:  # who did it: after every refusal, before a change
            return self._promote(context, start)

    def _promote(self, context: Any, start: ActStart) -> dict:
        params = context["params"]
        done = promote_topics(self.spec, self.source_cluster, self.destination_cluster, self.state_store,
                              names(params.get(TOPICS_FIELD)), context.get("run_id") or "promote-topics",
                              threads_engine(), waived_groups=names(params.get(WAIVE_FIELD)),
                              quiet_window_s=self.quiet_window_s, before_change=start)
        out = {t: {"run_id": r.run_id, "promoted_at_ms": r.promoted_at_ms} for t, r in done.items()}
        events = announce_promotion(context, self, self.spec, self.state_store, self.source_cluster.bootstrap_servers,
                                    self.destination_cluster.bootstrap_servers, sorted(done),
                                    str(context.get("run_id") or "promote-topics"), mark=True)
        for uri in events:
            self.log.info("asset event %s: promoted", uri)
        # every topic promoted already: a no-op, nothing recorded
        act = self.record_act(context, PROMOTE_TOPICS, DONE) if start.record is not None else None
        return {**out, "run_report": self.publish(context, sorted(done), act)}
