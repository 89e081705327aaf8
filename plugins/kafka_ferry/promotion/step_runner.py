"""The one step runner: walks a declared ``StepTable`` (``core.cutover.step_table``) for every promotion and rollback.

Why one: the promotion, the staged group and topic promotions, the rollback and the topics' rollback each had their
own resume loop, and the staged ones an if-chain whose last line ran for any name no branch matched. Here the plan
(resume past the steps recorded done, refuse a step whose predecessors are not done, refuse an unknown name) is
decided by ``core.cutover.step_table.plan_steps`` before any step runs; then each step runs in table order and its
outcome goes to the table's recorder, the one place a runner's step records are written (``StepTable.record``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kafka_ferry.core.cutover.step_table import RESUMED, StepOutcome, StepPlan, StepTable

log = logging.getLogger(__name__)

C = TypeVar("C")


def run_table(table: StepTable[C], runner: C, done: Iterable[str], label: str, wanted: Iterable[str] | None = None,
              after_step: Callable[[str], None] | None = None, plan: StepPlan | None = None,
              before_change: Callable[[], object] | None = None) -> dict[str, dict[str, Any]]:
    """Run ``table``'s ``wanted`` steps (all by default) on ``runner``, skipping those in ``done``; returns per step
    ``{"status": "resumed"}`` or its ``StepOutcome.as_report()``. ``plan``: the walk, when the caller decided it
    already (to check rights for the steps still to run first). ``label`` names the run in the log ("promotion
    orders"); ``after_step`` is a test seam (e.g. to kill the run after a step). ``before_change`` is called once,
    before the first step that changes anything (a ``reads_only`` step, which may still refuse, runs first) and
    before the first step record: the caller records who acted there, so a refusal leaves no record (issue 42)."""
    plan = plan if plan is not None else table.plan(done, wanted)
    out: dict[str, dict[str, Any]] = {}
    changing = before_change is None  # True once before_change was called (or there is none)
    for name, how in plan.walk:
        if how == RESUMED:
            log.info("%s: step %s already done, skipped (resume)", label, name)
            out[name] = {"status": RESUMED}
            continue
        log.info("%s: step %s starting", label, name)
        step = table.step(name)
        if not changing and not step.reads_only:
            changing = _begin(before_change)
        started = time.monotonic()
        summary = step.run(runner)
        outcome = StepOutcome(name, summary, time.monotonic() - started, int(time.time() * 1000))
        if not changing:
            changing = _begin(before_change)
        table.record(runner, outcome)
        out[name] = outcome.as_report()
        log.info("%s: step %s done in %.2f s: %s", label, name, outcome.duration_s, summary or "")
        if after_step:
            after_step(name)
    return out


def _begin(before_change: Callable[[], object] | None) -> bool:
    if before_change is not None:
        before_change()
    return True
