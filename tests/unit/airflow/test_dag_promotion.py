"""The translation/promotion DAG pieces: a mode branch, catch-up translation, sensor-gated promotion."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param

from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.dag_promotion import (
    PROMOTE_ENTRY,
    _choose,
    add_mode_branch,
    add_promotion_tasks,
    add_translation_tasks,
    trigger_params,
)

SPEC = Path(__file__).resolve().parents[3] / "dags" / "migrations" / "demo-tenant.yaml"


def described(param: Param) -> str:
    """A trigger-form field's description, which every field of the form has."""
    assert param.description is not None
    return param.description


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
    assert _choose("plan_copy", list(PROMOTE_ENTRY), params={"mode": "rollback"}) == "rollback"
    assert _choose("plan_copy", list(PROMOTE_ENTRY), params={"mode": "rollback-plan"}) == "rollback"
    with pytest.raises(ValueError, match="mode must be"):
        _choose("plan_copy", list(PROMOTE_ENTRY), params={"mode": "yolo"})


def test_mode_param_is_an_enum_defaulting_to_catch_up():
    params = trigger_params("demo-tenant")
    mode = params["mode"]
    assert mode.resolve() == "catch-up"
    assert mode.schema["enum"] == ["catch-up", "promote", "promote-groups", "promote-topics", "dry-run", "rollback",
                                   "rollback-plan"]
    assert params["groups"].resolve() == [] and params["waive_groups"].schema["section"] == "Staged cutover"
    assert (mode.schema["section"], params["confirm_migration"].schema["section"]) == ("Run", "Promotion")
    assert "demo-tenant" in described(params["confirm_migration"])
    assert params["confirm_migration"].resolve() is None and params["allow_rewind"].resolve() is False
    with pytest.raises(Exception):  # noqa: B017 - Airflow raises ParamValidationError
        mode.resolve("yolo")


def test_the_groups_field_offers_the_groups_a_catch_up_run_saw_ready(tmp_path):
    from kafka_ferry.core.cutover.staged_cutover import GroupReadiness
    from kafka_ferry.promotion.group_readiness import read_ready_file, write_ready_file

    assert read_ready_file(tmp_path) == ([], None)  # no run looked yet: a free list, no claim about readiness
    plain = trigger_params("demo-tenant")["groups"]
    assert "examples" not in plain.schema and "Ready at" not in described(plain)

    write_ready_file(tmp_path, [GroupReadiness("billing", True, "no members, quiet"),
                                GroupReadiness("audit", False, "2 member(s) on the source"),
                                GroupReadiness("alerts", True, "no members, quiet")], 1_795_000_000_000)
    ready, as_of = read_ready_file(tmp_path)
    assert (ready, as_of) == (["alerts", "billing"], 1_795_000_000_000)
    offered = trigger_params("demo-tenant", ready, as_of)["groups"]
    assert offered.schema["examples"] == ["alerts", "billing"]
    assert "Ready at the last catch-up run (2026-11-18 11:06 UTC): alerts, billing." in described(offered)
    assert offered.resolve(["billing"]) == ["billing"]

    write_ready_file(tmp_path, [GroupReadiness("audit", False, "committed 3 s ago")], 1_795_000_000_000)
    none_ready = trigger_params("demo-tenant", *read_ready_file(tmp_path))["groups"]
    assert "examples" not in none_ready.schema and "No group was ready" in described(none_ready)

    (tmp_path / "ready-groups.json").write_text("{not json")
    assert read_ready_file(tmp_path) == ([], None)  # a torn file never breaks the DAG's parse
