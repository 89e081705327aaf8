"""The translation and promotion pieces of a migration DAG, for ``dag_factory.build_migration_dag``.

Why a branch on a Param: a promotion is a deliberate, trigger-form choice (``mode=promote``, confirmed by
typing the migration's name, checked by the pre-flight before anything changes), never scheduled;
scheduled runs take the default ``catch-up`` path (copy batch, then translate + checkpoint); ``dry-run``
takes the catch-up path with every task planning only.

Why two branches: the rollback modes must not run what the other modes need first (provisioning and the schema
migration refuse a promoted migration, the very state a rollback starts from), so ``choose_route`` sends them
straight from the pre-flight (which checks the trigger for every mode) to the ``rollback`` task; every other mode
provisions, then ``choose_mode`` picks its path. No task of one mode can fail a run of another: the other mode's
tasks are skipped.

Wiring (inside ``with DAG(..., params=trigger_params(spec.name))``)::

    route = add_route_branch(preflight, provision_entry="provision_topics")  # rollback modes: straight to rollback
    branch = add_mode_branch(groups, catch_up_entry="plan_copy", promote_entry=PROMOTE_ENTRY)
    branch >> plan_copy >> copy >> copy_report          # the catch-up copy tasks
    add_translation_tasks(dag, spec_path, copy_report)  # translate + checkpoint after each batch
    add_promotion_tasks(dag, spec, spec_path, branch)   # sensors -> promotion steps
    add_staged_promotion_tasks(dag, spec_path, branch, route)  # promote-groups/-topics after provisioning, rollback
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.providers.standard.operators.python import BranchPythonOperator
from airflow.sdk import DAG, BaseOperator, Param

from kafka_ferry.airflow_native.assets import promotion_outlets
from kafka_ferry.core.cutover.step_table import StepTable
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.core.specs.trigger_form import (
    CATCH_UP,
    CONFIRM_FIELD,
    DRY_RUN,
    DRY_RUN_TEMPLATE,
    GROUPS_FIELD,
    MAX_NAME_LENGTH,
    MAX_NAMES,
    MODES,
    PROMOTE,
    PROMOTE_GROUPS,
    PROMOTE_TOPICS,
    ROLLBACK,
    ROLLBACK_PLAN,
    TOPICS_FIELD,
    WAIVE_FIELD,
)
from kafka_ferry.operators.promotion import PromoteMigrationOperator
from kafka_ferry.operators.provision import NO_OP_KEY
from kafka_ferry.operators.rollback import RollbackMigrationOperator
from kafka_ferry.operators.spark_checkpoints import HandOverSparkCheckpointsOperator
from kafka_ferry.operators.staged_promotion import PromoteGroupsOperator, PromoteTopicsOperator
from kafka_ferry.operators.translation import TranslateOffsetsOperator
from kafka_ferry.promotion.steps import PROMOTION_TABLE, PromotionRunner
from kafka_ferry.sensors.promotion_sensors import (
    GroupOffsetsSyncedSensor,
    ReplicationLagSensor,
    SourceGroupsInactiveSensor,
    SourceQuiescedSensor,
)

PROMOTE_ENTRY = ("source_quiesced", "source_groups_inactive")
# the promotion's step tasks (``promotion.steps.PROMOTION_TABLE`` says which steps each runs), in order, with the
# gates between them: the lag after the final copy, the synced offsets after the commit
PROMOTE_TASKS = ("promote_final_copy", "promote_translate_commit", "promote_reconcile_mark")
ROLLBACK_ENTRY = "rollback"
PREFLIGHT_TASK = "preflight"  # dag_factory's pre-flight: its XCom says whether a staged mode is a no-op
ROLLBACK_MODES = (ROLLBACK, ROLLBACK_PLAN)
STAGED_ENTRY = {PROMOTE_GROUPS: "promote_groups", PROMOTE_TOPICS: "promote_topics", ROLLBACK: ROLLBACK_ENTRY,
                ROLLBACK_PLAN: ROLLBACK_ENTRY}


FORM_GROUPS = 50  # ready groups the trigger form offers by name
# the form's name lists, bounded in the schema too (Airflow refuses a longer list at trigger time; pre-flight
# checks the same bounds with its own message: core.specs.trigger_form)
NAME_LIST: dict[str, Any] = {"items": {"type": "string", "maxLength": MAX_NAME_LENGTH}, "maxItems": MAX_NAMES}


def _groups_param(ready: list[str], as_of_ms: int | None) -> Param:
    """The form's groups field; when a catch-up run saw groups ready to promote, it offers exactly those."""
    description = "For mode promote-groups: source consumer groups, one per line. Their consumers must have " \
                  "stopped on the source. For mode rollback (or rollback-plan): only these promoted groups go back."
    if as_of_ms is None:
        return Param([], type=["null", "array"], **NAME_LIST, title="Groups to promote",
                     section="Staged cutover", description=description)
    when = datetime.fromtimestamp(as_of_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    # bounded: the form (and the serialized DAG) carries at most FORM_GROUPS names (issue 36: every ready group
    # made 1.5 MB per DAG at 50k groups); the rest are in the catch-up's log and its readiness file
    offered = [g[:MAX_NAME_LENGTH] for g in ready[:FORM_GROUPS]]
    more = f" and {len(ready) - len(offered)} more (the last catch-up's log lists every one)" \
        if len(ready) > len(offered) else ""
    seen = f"Ready at the last catch-up run ({when}): {', '.join(offered)}{more}." if ready else \
        f"No group was ready at the last catch-up run ({when}): their consumers still run or commit on the source."
    examples: dict[str, Any] = {"examples": offered} if offered else {}  # a JSON schema keyword, when any
    return Param([], type=["null", "array"], **NAME_LIST, title="Groups to promote",
                 section="Staged cutover", description=f"{description} {seen}", **examples)


def trigger_params(migration: str, ready_groups: Sequence[str] = (), ready_as_of_ms: int | None = None
                   ) -> dict[str, Param]:
    """The trigger form: the run's mode, and what a promotion needs (a typed confirmation, rewinding).

    ``ready_groups`` (as a catch-up run last saw them, ``promotion.group_readiness``) become the choices of the groups
    field, so the form offers the groups that can be promoted; the promote task checks again before it acts.
    """
    return {
        "mode": Param(CATCH_UP, type="string", enum=list(MODES), title="Run mode", section="Run",
                      values_display={CATCH_UP: "catch-up: copy the next batch", DRY_RUN: "dry-run: plan only",
                                      PROMOTE: "promote: cut over (needs confirmation)",
                                      PROMOTE_GROUPS: "promote-groups: move the chosen consumer groups",
                                      PROMOTE_TOPICS: "promote-topics: move the chosen topics' producers",
                                      ROLLBACK: "rollback: back to the source after a cutover (needs confirmation)",
                                      ROLLBACK_PLAN: "rollback-plan: what a rollback would do, change nothing"},
                      description_md="`catch-up`: copy a batch, then translate and checkpoint. `dry-run`: show the "
                                     "pre-flight diff and the next batch, change nothing. `promote`: wait until "
                                     "producers and source consumers stopped, copy to lag 0, translate, commit "
                                     "destination groups, reconcile, mark promoted. "
                                     "`promote-groups`: while producers still write to the source, move each "
                                     "group named below (its source consumers stopped; the task logs which groups are "
                                     "ready). `promote-topics`: once every "
                                     "group reading them is promoted or waived, move the topics named below. "
                                     "`rollback`: after a promotion, once the destination is quiet, copy back what "
                                     "producers wrote there, commit every group on the source where it stopped, "
                                     "mark rolled back. `rollback-plan`: show that plan, change nothing."),
        # null allowed: the form sends an empty text field as null, and a catch-up leaves it empty
        CONFIRM_FIELD: Param(None, type=["null", "string"], title="Confirm promotion", section="Promotion",
                             description=f"For the promote modes and rollback: type the migration name "
                                         f"({migration}) to confirm the cutover (or the rollback). Ignored by "
                                         "catch-up and dry-run."),
        "allow_rewind": Param(False, type="boolean", title="Allow rewinding destination groups", section="Promotion",
                              description="For modes promote and promote-groups: the promotion may move a "
                                          "destination group's offsets backwards (a group whose consumers moved on "
                                          "on the destination is refused otherwise). Ignored by the other modes."),
        GROUPS_FIELD: _groups_param(sorted(ready_groups), ready_as_of_ms),
        TOPICS_FIELD: Param([], type=["null", "array"], **NAME_LIST, title="Topics to promote",
                            section="Staged cutover", description="For mode promote-topics: source topics, one per "
                            "line. Their producers must have stopped on the source. For mode rollback (or "
                            "rollback-plan): only these promoted topics go back, with the groups reading them; "
                            "their producers and consumers must have stopped on the destination."),
        WAIVE_FIELD: Param([], type=["null", "array"], **NAME_LIST, title="Waive groups",
                           section="Staged cutover", description="For mode promote-topics: reading groups that may "
                           "stay unpromoted (their destination offsets are left as they are)."),
    }


def _mode(context) -> str:
    mode = context["params"].get("mode", CATCH_UP)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(repr(m) for m in MODES)}, got {mode!r}")
    return mode


def _route(provision_entry: str, **context) -> str | list[str]:
    """The rollback modes go to the rollback task, past provisioning; every other mode provisions first, but for
    a staged mode whose every unit the pre-flight found promoted already (a no-op): nothing follows, so the run
    succeeds having written nothing."""
    if _mode(context) in ROLLBACK_MODES:
        return ROLLBACK_ENTRY
    ti = context.get("ti")
    checked = ti.xcom_pull(task_ids=PREFLIGHT_TASK) if ti is not None else None
    if isinstance(checked, dict) and checked.get(NO_OP_KEY):
        return []
    return provision_entry


def add_route_branch(upstream: BaseOperator | None, provision_entry: str,
                     task_id: str = "choose_route") -> BaseOperator:
    """A branch right after the pre-flight: ``rollback`` for the rollback modes, else ``provision_entry``."""
    branch = BranchPythonOperator(task_id=task_id, python_callable=_route,
                                  op_kwargs={"provision_entry": provision_entry})
    if upstream is not None:
        upstream >> branch
    return branch


def _choose(catch_up_entry: str | list[str], promote_entry: str | list[str], **context) -> str | list[str]:
    mode = _mode(context)
    if mode in STAGED_ENTRY:
        return STAGED_ENTRY[mode]
    return list(promote_entry) if mode == PROMOTE else catch_up_entry


def add_mode_branch(upstream: BaseOperator | None, catch_up_entry: str | list[str],
                    promote_entry: Sequence[str] = PROMOTE_ENTRY, task_id: str = "choose_mode") -> BaseOperator:
    """A branch that follows ``catch_up_entry`` or ``promote_entry`` task ids by the ``mode`` param."""
    branch = BranchPythonOperator(task_id=task_id, python_callable=_choose,
                                  op_kwargs={"catch_up_entry": catch_up_entry, "promote_entry": list(promote_entry)})
    if upstream is not None:
        upstream >> branch
    return branch


def add_translation_tasks(dag: DAG, spec_path: str | Path, upstream_task: BaseOperator,
                          commit_offsets: bool = False) -> BaseOperator:
    """Catch-up: translate + checkpoint + offset map after the batch (runs also when the copy skipped)."""
    translate = TranslateOffsetsOperator(task_id="translate_offsets", spec_path=str(spec_path), dag=dag,
                                         commit_offsets=commit_offsets, allow_rewind="{{ params.allow_rewind }}",
                                         dry_run=DRY_RUN_TEMPLATE)
    upstream_task >> translate
    return translate


def add_staged_promotion_tasks(dag: DAG, spec_path: str | Path, branch: BaseOperator,
                               route: BaseOperator | None = None, migration: str | None = None
                               ) -> list[BaseOperator]:
    """promote-groups / promote-topics after the mode branch, rollback (and its plan) after the route branch (or
    after the mode branch when there is none): one task each, never scheduled (a form choice).

    ``migration``: the spec's name; the topics task then declares the migration's promoted asset alias as outlet.
    """
    groups = PromoteGroupsOperator(task_id=STAGED_ENTRY[PROMOTE_GROUPS], spec_path=str(spec_path), dag=dag,
                                   execution_timeout=timedelta(hours=1))
    topics = PromoteTopicsOperator(task_id=STAGED_ENTRY[PROMOTE_TOPICS], spec_path=str(spec_path), dag=dag,
                                   execution_timeout=timedelta(hours=1),
                                   outlets=promotion_outlets(migration) if migration else None)
    rollback = RollbackMigrationOperator(task_id=STAGED_ENTRY[ROLLBACK], spec_path=str(spec_path), dag=dag,
                                         dry_run=f"{{{{ params.mode == '{ROLLBACK_PLAN}' }}}}",
                                         execution_timeout=timedelta(hours=1))
    branch >> [groups, topics]
    (route if route is not None else branch) >> rollback
    return [groups, topics, rollback]


def promotion_task_steps(table: StepTable[PromotionRunner]) -> dict[str, tuple[str, ...]]:
    """The steps each promotion task runs, from the step table: one task per task it declares, in its order (a step
    the table moves to another task moves here too). A task this wiring does not know fails the parse, naming both."""
    steps = table.by_task()
    if tuple(steps) != PROMOTE_TASKS:
        raise ValueError(f"promotion step table {table.kind!r} runs in tasks {list(steps)}, the DAG wires "
                         f"{list(PROMOTE_TASKS)} (in this order): declare each step's task as one of these")
    return steps


def add_promotion_tasks(dag: DAG, spec: MigrationSpec, spec_path: str | Path, branch: BaseOperator,
                        deferrable: bool = True) -> BaseOperator:
    """Promote: quiesced + groups inactive -> final copy -> lag gate -> translate/commit -> synced gate -> finish
    (and, with ``consumers.spark_checkpoints``, translate/commit -> hand over the Spark checkpoints -> finish)."""
    path, p = str(spec_path), spec.promotion
    # a sensor's try is bounded like any task, and never cut shorter than its own gate timeout
    gate: dict[str, Any] = {"spec_path": path, "dag": dag, "deferrable": deferrable, "mode": "reschedule",
            "poke_interval": p.poke_interval_seconds, "timeout": p.sensor_timeout_seconds,
            "execution_timeout": timedelta(seconds=max(spec.timeouts.task_seconds, p.sensor_timeout_seconds))}
    quiesced = SourceQuiescedSensor(task_id=PROMOTE_ENTRY[0], **gate)
    inactive = SourceGroupsInactiveSensor(task_id=PROMOTE_ENTRY[1], **gate)
    steps = promotion_task_steps(PROMOTION_TABLE)
    per_task: dict[str, dict[str, Any]] = {
        "promote_final_copy": {"execution_timeout": timedelta(seconds=spec.timeouts.copy_seconds)},
        "promote_translate_commit": {"allow_rewind": "{{ params.allow_rewind }}"},
        "promote_reconcile_mark": {"outlets": promotion_outlets(spec.name)},
    }
    final_copy, translate_commit, finish = (
        PromoteMigrationOperator(task_id=task, spec_path=path, dag=dag, steps=steps[task], **per_task[task])
        for task in PROMOTE_TASKS)
    lag = ReplicationLagSensor(task_id="replication_lag", **gate)
    synced = GroupOffsetsSyncedSensor(task_id="group_offsets_synced", **gate)
    branch >> [quiesced, inactive]
    [quiesced, inactive] >> final_copy >> lag >> translate_commit >> synced >> finish
    if spec.consumers.spark_checkpoints:  # the listed Spark queries resume where the final translation put them
        checkpoints = HandOverSparkCheckpointsOperator(task_id="hand_over_spark_checkpoints", spec_path=path, dag=dag)
        translate_commit >> checkpoints >> finish
    return finish
