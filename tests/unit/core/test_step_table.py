"""The walk every step runner shares (``core.cutover.step_table``): resume point, refusals, unknown names,
declarations."""

from __future__ import annotations

from enum import StrEnum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.core.cutover.step_table import (
    RESUMED,
    RUN,
    Step,
    StepOutcome,
    StepsOutOfOrder,
    StepTable,
    UnknownStep,
    plan_steps,
)

ORDER = ("a", "b", "c", "d", "e", "f")
subsets = st.sets(st.sampled_from(ORDER))


@given(subsets)
def test_a_full_run_resumes_at_the_first_step_not_done_and_never_refuses(done):
    plan = plan_steps("t", ORDER, done)
    assert [s for s, _ in plan.walk] == list(ORDER)  # every step, in table order
    assert plan.resumed == tuple(s for s in ORDER if s in done)  # B: never run again
    assert plan.to_run == tuple(s for s in ORDER if s not in done)
    assert plan.resume_at == next((s for s in ORDER if s not in done), None)


@given(st.integers(0, len(ORDER)))
def test_records_a_runner_writes_itself_resume_right_after_the_last_one(k):
    plan = plan_steps("t", ORDER, ORDER[:k])  # a run killed after its k-th step left a prefix
    assert plan.resume_at == (ORDER[k] if k < len(ORDER) else None)
    assert plan.to_run == ORDER[k:]


@given(subsets, st.lists(st.sampled_from(ORDER)))
def test_a_step_runs_only_after_its_predecessors_else_the_run_is_refused_before_anything(done, wanted):
    # the oracle: refused iff some asked-for step not done has a predecessor neither done nor asked for
    blocked = [(s, [p for p in ORDER[:ORDER.index(s)] if p not in done and p not in wanted])
               for s in ORDER if s in wanted and s not in done]
    blocked = [(s, missing) for s, missing in blocked if missing]
    if blocked:
        step, missing = blocked[0]
        with pytest.raises(StepsOutOfOrder) as refused:
            plan_steps("promotion", ORDER, done, wanted)
        assert (f"promotion: step {step} refused, nothing was run: the step(s) before it, {', '.join(missing)}, are "
                f"not recorded done; run them first (a run of every step resumes at {missing[0]})"
                ) == str(refused.value)
        assert retry_cannot_help(refused.value)
        return
    plan = plan_steps("promotion", ORDER, done, wanted)
    assert [s for s, _ in plan.walk] == [s for s in ORDER if s in wanted]  # table order, whatever the ask's order
    ran: set[str] = set()
    for step, how in plan.walk:
        assert how == (RESUMED if step in done else RUN)
        if how == RUN:
            assert all(p in done or p in ran for p in ORDER[:ORDER.index(step)])
            ran.add(step)


def test_unknown_names_asked_for_or_recorded_are_refused_naming_them():
    with pytest.raises(UnknownStep, match="^promotion: unknown step\\(s\\) fence_lift asked for; its steps are a, b"):
        plan_steps("promotion", ORDER, (), ["a", "fence_lift"])
    with pytest.raises(UnknownStep, match="unknown step\\(s\\) zz recorded done in the state"):
        plan_steps("promotion", ORDER, ["a", "zz"])
    with pytest.raises(UnknownStep) as unknown:
        plan_steps("promotion", ORDER, [], ["nope"])
    assert retry_cannot_help(unknown.value) and isinstance(unknown.value, ValueError)


class Colour(StrEnum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


def paint(colour: str):
    def step(canvas: list[str]) -> dict[str, str]:
        canvas.append(colour)
        return {"painted": colour}
    return step


def record(canvas: list[str], outcome: StepOutcome) -> None:
    canvas.append(f"recorded {outcome.step}")


def declare(*names: Colour) -> StepTable[list[str]]:
    return StepTable("paint", Colour, tuple(Step(n, paint(n), f"the {n} coat", f"task_{i // 2}")
                                            for i, n in enumerate(names)), record)


def test_a_table_must_declare_every_member_once_in_order():
    table = declare(Colour.RED, Colour.GREEN, Colour.BLUE)
    assert table.order == ("red", "green", "blue") and all(type(s) is str for s in table.order)
    assert table.by_task() == {"task_0": ("red", "green"), "task_1": ("blue",)}
    assert table.step("green").run([]) == {"painted": "green"}
    with pytest.raises(UnknownStep, match="paint: unknown step 'fence'; its steps are red, green, blue"):
        table.step("fence")  # never a default branch
    assert table.check(["blue", "red"]) == ("blue", "red")
    with pytest.raises(UnknownStep, match="unknown step\\(s\\) mauve"):
        table.check(["red", "mauve"])
    with pytest.raises(ValueError, match=r"paint: declares \['red', 'blue'\], but Colour is \['red', 'green', "):
        declare(Colour.RED, Colour.BLUE)  # a step left out fails the declaration
    with pytest.raises(ValueError, match="every member once, in order"):
        declare(Colour.GREEN, Colour.RED, Colour.BLUE)


def test_outcome_report_entry():
    outcome = StepOutcome("red", {"painted": "red"}, 1.23456, 1_795_000_000_000)
    assert outcome.as_report() == {"status": "done", "duration_s": 1.235, "summary": {"painted": "red"}}
