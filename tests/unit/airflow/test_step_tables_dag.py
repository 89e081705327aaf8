"""Every step table covers its steps, and the migration DAG runs every step of every table (a step, or a table,
left out fails here): the promotion's tasks are built from ``PROMOTION_TABLE``, the staged and rollback tasks run
their whole tables."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

from kafka_ferry.core.cutover.step_names import GroupStep, PromotionStep, RollbackStep, TopicRollbackStep, TopicStep
from kafka_ferry.core.cutover.step_table import Step, StepTable
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.dag_factory import build_migration_dag
from kafka_ferry.dag_promotion import PROMOTE_TASKS, promotion_task_steps
from kafka_ferry.promotion.group import GROUP_TABLE
from kafka_ferry.promotion.rollback import ROLLBACK_TABLE
from kafka_ferry.promotion.steps import PROMOTION_TABLE
from kafka_ferry.promotion.topic import TOPIC_TABLE
from kafka_ferry.promotion.topic_rollback import TOPIC_ROLLBACK_TABLE

SPEC = Path(__file__).resolve().parents[3] / "dags" / "migrations" / "demo-tenant.yaml"
TABLES: dict[StepTable[Any], type[StrEnum]] = {
    PROMOTION_TABLE: PromotionStep, GROUP_TABLE: GroupStep, TOPIC_TABLE: TopicStep, ROLLBACK_TABLE: RollbackStep,
    TOPIC_ROLLBACK_TABLE: TopicRollbackStep}


@pytest.fixture(scope="module")
def dag():
    return build_migration_dag(load_spec(SPEC), SPEC)


def test_every_table_covers_its_steps_in_order():
    for table, names in TABLES.items():
        assert table.names is names and table.order == tuple(str(n) for n in names), table.kind
        assert all(s.records and callable(s.run) for s in table.steps), table.kind
    assert len({t.kind for t in TABLES}) == len(TABLES)


def test_the_dag_runs_every_step_of_every_table(dag):
    covered: dict[str, list[str]] = {}
    for task in dag.tasks:
        for kind in getattr(task, "step_tables", ()):
            # the promotion's tasks run the steps they are built with; the other tables run whole in one task
            steps = task.steps if kind == PROMOTION_TABLE.kind else next(t for t in TABLES if t.kind == kind).order
            covered.setdefault(kind, []).extend(steps)
    for table in TABLES:
        assert covered.get(table.kind) == list(table.order), f"the DAG does not run every step of {table.kind}"
        for step in table.steps:  # each step's declared task is the DAG's task that runs it
            assert table.kind in getattr(dag.get_task(step.task), "step_tables", ()), (table.kind, step.name)
    promote = [dag.get_task(t) for t in PROMOTE_TASKS]
    assert [t.steps for t in promote] == list(PROMOTION_TABLE.by_task().values())
    for before, after in zip(promote, promote[1:], strict=False):  # a gate sits between two step tasks
        [gate] = before.downstream_list
        assert gate.downstream_task_ids >= {after.task_id}


def test_a_table_whose_tasks_the_dag_does_not_wire_fails_the_parse():
    assert promotion_task_steps(PROMOTION_TABLE) == {"promote_final_copy": ("final_copy",),
                                                     "promote_translate_commit": ("final_translation",
                                                                                  "commit_offsets"),
                                                     "promote_reconcile_mark": ("reconcile", "switch_timestamps",
                                                                                "mark_promoted")}
    moved = StepTable(PROMOTION_TABLE.kind, PromotionStep, (
        *PROMOTION_TABLE.steps[:-1],
        Step(PromotionStep.MARK_PROMOTED, PROMOTION_TABLE.steps[-1].run, "the mark", "promote_mark_alone")),
        PROMOTION_TABLE.record)
    with pytest.raises(ValueError, match="runs in tasks .*'promote_mark_alone'.*declare each step's task as one"):
        promotion_task_steps(moved)


def test_the_last_promotion_task_is_refused_while_the_middle_one_never_finished():
    from kafka_ferry.core.cutover.step_table import StepsOutOfOrder

    finish = promotion_task_steps(PROMOTION_TABLE)["promote_reconcile_mark"]
    with pytest.raises(StepsOutOfOrder) as refused:  # the message docs/promotion.md quotes
        PROMOTION_TABLE.plan(["final_copy"], finish)
    assert str(refused.value) == (
        "promotion: step reconcile refused, nothing was run: the step(s) before it, final_translation, commit_offsets, "
        "are not recorded done; run them first (a run of every step resumes at final_translation)")
    assert PROMOTION_TABLE.plan(PROMOTION_TABLE.order[:3], finish).to_run == finish
