"""The translation/promotion DAG pieces: a mode branch, catch-up translation, sensor-gated promotion."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from kafka_ferry.core.spec import load_spec
from kafka_ferry.dag_promotion import (
    PROMOTE_ENTRY,
    _choose,
    add_mode_branch,
    add_promotion_tasks,
    add_translation_tasks,
    trigger_params,
)

SPEC = Path(__file__).resolve().parents[3] / "dags" / "migrations" / "demo-tenant.yaml"


def build():
    spec = load_spec(SPEC)
    with DAG("t", params=trigger_params("demo-tenant"), schedule=None) as dag:
        groups = EmptyOperator(task_id="provision_groups")
        branch = add_mode_branch(groups, catch_up_entry="plan_copy")
        report = EmptyOperator(task_id="copy_report")
        branch >> EmptyOperator(task_id="plan_copy") >> report
        add_translation_tasks(dag, SPEC, report)
        add_promotion_tasks(dag, spec, SPEC, branch)
    return dag


def test_structure():
    dag = build()
    down = {t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks}
    assert down["choose_mode"] == ["plan_copy", "source_groups_inactive", "source_quiesced"]
    assert down["copy_report"] == ["translate_offsets"]
    chain = ["promote_final_copy", "replication_lag", "promote_translate_commit", "group_offsets_synced",
             "promote_reconcile_mark"]
    for before, after in zip(chain, chain[1:], strict=False):
        assert down[before] == [after]
    assert down["source_quiesced"] == down["source_groups_inactive"] == ["promote_final_copy"]
    sensors = [dag.get_task(t) for t in ("source_quiesced", "replication_lag", "group_offsets_synced")]
    assert all(s.deferrable and s.mode == "reschedule" for s in sensors)
    assert dag.get_task("translate_offsets").trigger_rule == "none_failed_min_one_success"


def test_branch_follows_the_mode_param():
    assert _choose("plan_copy", list(PROMOTE_ENTRY), params={"mode": "catch-up"}) == "plan_copy"
    assert _choose("plan_copy", list(PROMOTE_ENTRY), params={"mode": "promote"}) == list(PROMOTE_ENTRY)
    assert _choose("plan_copy", list(PROMOTE_ENTRY), params={"mode": "dry-run"}) == "plan_copy"
    assert _choose("plan_copy", list(PROMOTE_ENTRY), params={"mode": "promote-groups"}) == "promote_groups"
    assert _choose("plan_copy", list(PROMOTE_ENTRY), params={"mode": "promote-topics"}) == "promote_topics"
    with pytest.raises(ValueError, match="mode must be"):
        _choose("plan_copy", list(PROMOTE_ENTRY), params={"mode": "yolo"})


def test_mode_param_is_an_enum_defaulting_to_catch_up():
    params = trigger_params("demo-tenant")
    mode = params["mode"]
    assert mode.resolve() == "catch-up"
    assert mode.schema["enum"] == ["catch-up", "promote", "promote-groups", "promote-topics", "dry-run"]
    assert params["groups"].resolve() == [] and params["waive_groups"].schema["section"] == "Staged cutover"
    assert (mode.schema["section"], params["confirm_migration"].schema["section"]) == ("Run", "Promotion")
    assert "demo-tenant" in params["confirm_migration"].description
    assert params["confirm_migration"].resolve() is None and params["allow_rewind"].resolve() is False
    with pytest.raises(Exception):  # noqa: B017 - Airflow raises ParamValidationError
        mode.resolve("yolo")
