"""The trigger form's rules: a promotion must be confirmed by name, unknown fields and modes are refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.specs.trigger_form import (
    DRY_RUN_TEMPLATE,
    MODES,
    TriggerRefused,
    check_trigger,
    is_dry_run,
    names,
    trigger_problems,
)

KNOWN = ("mode", "confirm_migration", "allow_rewind")


@pytest.mark.parametrize("params", [{}, {"mode": "catch-up"}, {"mode": "dry-run", "confirm_migration": "x"},
                                    {"mode": "promote", "confirm_migration": "orders"},
                                    {"mode": "promote", "confirm_migration": "  orders "}])
def test_valid_runs_pass_and_return_their_mode(params):
    assert check_trigger("orders", params, params.keys(), KNOWN) == params.get("mode", "catch-up")


def test_every_problem_is_named_at_once():
    with pytest.raises(TriggerRefused) as refused:
        check_trigger("orders", {"mode": "promote", "confirm_migration": "Orders"},
                      ["mode", "confirm_migration", "dry_run", "zzz"], KNOWN)
    assert str(refused.value) == (
        "run of migration 'orders' refused: "
        "unknown trigger field 'dry_run' (use mode='dry-run'); the form's fields are: allow_rewind, "
        "confirm_migration, mode; "
        "unknown trigger field 'zzz'; the form's fields are: allow_rewind, confirm_migration, mode; "
        "promote needs the migration name 'orders' typed into 'confirm_migration' to confirm the cutover; "
        "got 'Orders'")


def test_an_unknown_mode_is_refused_naming_the_modes():
    assert trigger_problems("orders", {"mode": "yolo"}) == [
        "mode 'yolo' is not one of 'catch-up', 'promote', 'promote-groups', 'promote-topics', 'dry-run', "
        "'rollback', 'rollback-plan'"]


@given(st.text(max_size=20))
def test_promote_passes_only_with_the_exact_name(typed):
    problems = trigger_problems("orders", {"mode": "promote", "confirm_migration": typed})
    assert (problems == []) == (typed.strip() == "orders")


@given(st.sampled_from(MODES), st.text(max_size=10))
def test_catch_up_and_dry_run_ignore_the_confirmation(mode, typed):
    problems = trigger_problems("orders", {"mode": mode, "confirm_migration": typed})
    names_given = {"groups": ["g"], "topics": ["t"]}
    problems = trigger_problems("orders", {"mode": mode, "confirm_migration": typed, **names_given})
    assert (problems == []) == (not (mode.startswith("promote") or mode == "rollback") or typed.strip() == "orders")


@pytest.mark.parametrize("mode, field", [("promote-groups", "groups"), ("promote-topics", "topics")])
def test_staged_modes_need_names_and_the_confirmation(mode, field):
    assert trigger_problems("orders", {"mode": mode, "confirm_migration": "orders", field: [" ", ""]}) == [
        f"{mode} needs at least one name in {field!r}; it is empty"]
    assert trigger_problems("orders", {"mode": mode, "confirm_migration": "orders", field: "a, b\nc"}) == []
    assert trigger_problems("orders", {"mode": mode, field: ["a"]})[0].startswith(f"{mode} needs the migration name")


def test_names_reads_lists_and_text():
    assert names(["b", " a ", ""]) == ["a", "b"] and names("x,\ny , z") == ["x", "y", "z"] and names(None) == []


def test_dry_run_template_and_predicate_agree():
    assert DRY_RUN_TEMPLATE == "{{ params.mode in ('dry-run', 'rollback-plan') }}"
    assert is_dry_run("rollback-plan") and not is_dry_run("rollback")
    assert is_dry_run("dry-run") and not is_dry_run("catch-up") and not is_dry_run("promote")


def test_a_rollback_is_confirmed_by_name_and_its_plan_is_not():
    assert trigger_problems("orders", {"mode": "rollback", "confirm_migration": "orders"}) == []
    assert trigger_problems("orders", {"mode": "rollback"}) == [
        "rollback needs the migration name 'orders' typed into 'confirm_migration' to confirm the rollback; "
        "it is empty"]
    assert trigger_problems("orders", {"mode": "rollback-plan"}) == []


def test_the_names_a_rollback_takes_are_checked_as_input_before_anything_runs():
    ok = {"mode": "rollback", "confirm_migration": "orders", "topics": ["orders.a", "orders_b-1"], "groups": ["g"]}
    assert trigger_problems("orders", ok) == []
    bad = {**ok, "topics": "orders.a\n../etc/passwd, {{ 7*7 }}\n" + "x" * 300}
    assert trigger_problems("orders", bad) == [
        "'topics': not a Kafka topic name (letters, digits, '.', '_', '-', 1 to 249): '../etc/passwd', "
        f"'{'x' * 60}', '{{{{ 7*7 }}}}'"]
    many = {"mode": "rollback-plan", "groups": [f"g{i}" for i in range(1001)]}
    assert trigger_problems("orders", many) == ["'groups' names 1001 units; at most 1000 per run"]
