"""The one step runner (``promotion.step_runner.run_table``): resumes after a kill, records each step once through
the table's recorder, refuses before running anything."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.cutover.step_table import Step, StepOutcome, StepsOutOfOrder, StepTable, UnknownStep
from kafka_ferry.promotion.step_runner import run_table


class Cutover(StrEnum):
    COPY = "copy"
    COMMIT = "commit"
    MARK = "mark"


@dataclass
class Migration:
    """A stand-in runner: what its steps did, and the records its recorder wrote (the state topic's part)."""

    effects: list[str] = field(default_factory=list)
    records: dict[str, dict] = field(default_factory=dict)

    def save(self, outcome: StepOutcome) -> None:
        self.records[outcome.step] = {"summary": outcome.summary, "finished_at_ms": outcome.finished_at_ms}


def _copy(m: Migration) -> dict:
    m.effects.append("copied")
    return {"records": 3}


def _commit(m: Migration) -> None:
    m.effects.append("committed")
    return None


def _mark(m: Migration) -> dict:
    m.effects.append("marked")
    return {"marked": True}


TABLE = StepTable("cutover", Cutover, (
    Step(Cutover.COPY, _copy, "records copied", "t1"),
    Step(Cutover.COMMIT, _commit, "nothing more", "t2"),
    Step(Cutover.MARK, _mark, "the mark", "t2"),
), Migration.save)


class Killed(Exception):
    pass


def kill_after(step: str):
    def seam(done: str) -> None:
        if done == step:
            raise Killed(done)
    return seam


def test_a_killed_run_resumes_after_its_last_recorded_step_and_runs_each_step_once():
    m = Migration()
    with pytest.raises(Killed):
        run_table(TABLE, m, m.records, "cutover demo", after_step=kill_after("commit"))
    assert m.effects == ["copied", "committed"] and list(m.records) == ["copy", "commit"]
    report = run_table(TABLE, m, m.records, "cutover demo")
    assert m.effects == ["copied", "committed", "marked"]  # nothing done twice
    assert {s: r["status"] for s, r in report.items()} == {"copy": "resumed", "commit": "resumed", "mark": "done"}
    assert report["mark"]["summary"] == {"marked": True} and report["mark"]["duration_s"] >= 0
    assert m.records["mark"]["summary"] == {"marked": True} and m.records["mark"]["finished_at_ms"] > 0
    again = run_table(TABLE, m, m.records, "cutover demo")
    assert set(r["status"] for r in again.values()) == {"resumed"} and len(m.effects) == 3


def test_a_task_that_skips_ahead_is_refused_before_any_step_runs():
    m = Migration()
    with pytest.raises(StepsOutOfOrder, match="cutover: step mark refused, nothing was run: the step\\(s\\) before "
                                              "it, copy, commit, are not recorded done"):
        run_table(TABLE, m, m.records, "cutover demo", wanted=["mark"])
    assert m.effects == [] and m.records == {}
    run_table(TABLE, m, m.records, "cutover demo", wanted=["copy"])  # the DAG's first task
    with pytest.raises(StepsOutOfOrder, match="step mark refused.*commit, are not"):
        run_table(TABLE, m, m.records, "cutover demo", wanted=["mark"])
    report = run_table(TABLE, m, m.records, "cutover demo", wanted=["mark", "commit"])  # the second task
    assert list(report) == ["commit", "mark"] and m.effects == ["copied", "committed", "marked"]


def test_an_unknown_step_is_an_error_never_a_default():
    m = Migration()
    with pytest.raises(UnknownStep, match="cutover: unknown step\\(s\\) lift_fence asked for"):
        run_table(TABLE, m, m.records, "cutover demo", wanted=["copy", "lift_fence"])
    assert m.effects == []


@given(st.lists(st.sampled_from([str(s) for s in Cutover]), max_size=6))
def test_any_sequence_of_kills_ends_with_every_step_run_exactly_once_in_order(kills):
    m = Migration()
    for killed in kills:  # each process dies right after the step named (if it gets that far)
        try:
            run_table(TABLE, m, m.records, "cutover demo", after_step=kill_after(killed))
        except Killed:
            pass
    run_table(TABLE, m, m.records, "cutover demo")
    assert m.effects == ["copied", "committed", "marked"] and list(m.records) == ["copy", "commit", "mark"]
