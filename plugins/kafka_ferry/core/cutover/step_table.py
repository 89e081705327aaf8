"""A runner's steps as one declared table, and the walk every runner shares: which steps a run resumes past,
which it runs, which it refuses.

Five runners (the promotion, a group's and a topic's staged promotion, the rollback, the topics' rollback) each
declare a ``StepTable``: per step its name (a member of the runner's enum, ``core.cutover.step_names``), the function
that does it, what it records, and the DAG task that runs it. ``promotion.step_runner.run_table`` walks a table: it asks
``plan_steps`` here what to do, runs the steps, and hands each outcome to the table's one recorder.

Invariants (``tests/unit/core/test_step_table.py`` asserts them for any record and any request):
  A. A table names every member of its step enum exactly once, in the enum's order (checked when it is declared:
     a step left out, or one too many, fails the import).
  B. A step recorded done is never run again (reported ``resumed``); the others run in table order. For the
     records a runner writes itself (a prefix of the table), the first step run is the one after the last recorded.
  C. A step runs only when every step before it in the table is recorded done or runs before it in the same run;
     otherwise the whole run is refused before any step runs (``StepsOutOfOrder``, naming the step and its missing
     predecessors): a DAG task that would skip ahead of an unfinished one fails once, changing nothing.
  D. An unknown step name, asked for or recorded, is refused (``UnknownStep``), never run as some default.

Pure: no Kafka, no Airflow, no clock; the runner measures time and writes the records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

from kafka_ferry.core.common.failures import Permanent

C = TypeVar("C")  # what a step function is handed: its runner (clusters, state store, the unit it works on)

Summary = Mapping[str, Any] | None  # what a step returns; its recorder stores it (None: nothing to add)

RESUMED = "resumed"
RUN = "run"


class UnknownStep(Permanent, ValueError):
    """A step name no table declares, asked for (a DAG task, a caller) or found in the state; the message names it
    and the table's steps. Permanent: the same name is unknown on every try."""


class StepsOutOfOrder(Permanent, RuntimeError):
    """A step asked for while a step before it is neither recorded done nor run first; nothing was run. Permanent:
    the same request against the same records is refused again (run the missing steps first)."""


@dataclass(frozen=True)
class StepPlan:
    """What one run of a table does, decided before anything runs: each asked-for step in table order, with
    ``RESUMED`` (recorded done: skipped) or ``RUN``."""

    kind: str
    walk: tuple[tuple[str, str], ...]

    @property
    def to_run(self) -> tuple[str, ...]:
        return tuple(s for s, how in self.walk if how == RUN)

    @property
    def resumed(self) -> tuple[str, ...]:
        return tuple(s for s, how in self.walk if how == RESUMED)

    @property
    def resume_at(self) -> str | None:
        """The first step this run runs (None: every asked-for step is done)."""
        return next(iter(self.to_run), None)


def plan_steps(kind: str, order: Sequence[str], done: Iterable[str], wanted: Iterable[str] | None = None) -> StepPlan:
    """The walk of ``order`` (a table's steps) for a run asking for ``wanted`` (all by default) with ``done``
    recorded (invariants B-D); raises ``UnknownStep`` or ``StepsOutOfOrder`` before anything runs."""
    known = [str(s) for s in order]
    recorded = {str(s) for s in done}
    asked = known if wanted is None else [str(s) for s in wanted]
    for names, how in ((asked, "asked for"), (sorted(recorded), "recorded done in the state")):
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise UnknownStep(f"{kind}: unknown step(s) {', '.join(unknown)} {how}; its steps are {', '.join(known)}")
    walk: list[tuple[str, str]] = []
    ran: set[str] = set()
    for position, step in enumerate(known):
        if step not in asked:
            continue
        if step in recorded:
            walk.append((step, RESUMED))
            continue
        missing = [p for p in known[:position] if p not in recorded and p not in ran]
        if missing:
            raise StepsOutOfOrder(
                f"{kind}: step {step} refused, nothing was run: the step(s) before it, {', '.join(missing)}, are not "
                f"recorded done; run them first (a run of every step resumes at {missing[0]})")
        walk.append((step, RUN))
        ran.add(step)
    return StepPlan(kind, tuple(walk))


@dataclass(frozen=True)
class Step(Generic[C]):
    """One declared step: its name, the function that does it (handed the runner, returns its summary), what it
    records when done (in words, for the reader of the table), and the DAG task that runs it. ``reads_only``: the
    step only looks and may refuse (a quiet window), so the runner's ``before_change`` waits until it passed."""

    name: StrEnum
    run: Callable[[C], Summary]
    records: str
    task: str
    reads_only: bool = False


@dataclass(frozen=True)
class StepTable(Generic[C]):
    """A runner's steps in order (invariant A) and its one recorder: ``record(runner, outcome)`` writes a finished
    step's record (when, how long, what it returned), the only place a runner's step records are written; what
    else a record should carry (who triggered the run, say) goes on ``StepOutcome`` and into the recorders."""

    kind: str
    names: type[StrEnum]
    steps: tuple[Step[C], ...]
    record: Callable[[C, StepOutcome], None]

    def __post_init__(self) -> None:
        declared, expected = [s.name for s in self.steps], list(self.names)
        if declared != expected:
            raise ValueError(f"step table {self.kind}: declares {[str(s) for s in declared]}, but "
                             f"{self.names.__name__} is {[str(s) for s in expected]} (every member once, in order)")

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(str(s.name) for s in self.steps)

    def step(self, name: str) -> Step[C]:
        """The declared step named ``name``; ``UnknownStep`` naming it otherwise (never a default)."""
        for s in self.steps:
            if s.name == name:
                return s
        raise UnknownStep(f"{self.kind}: unknown step {name!r}; its steps are {', '.join(self.order)}")

    def check(self, names: Iterable[str]) -> tuple[str, ...]:
        """``names`` as declared steps (in the caller's order); ``UnknownStep`` naming any other."""
        names = tuple(str(n) for n in names)
        unknown = sorted(set(names) - set(self.order))
        if unknown:
            raise UnknownStep(f"{self.kind}: unknown step(s) {', '.join(unknown)}; its steps are "
                              f"{', '.join(self.order)}")
        return names

    def plan(self, done: Iterable[str], wanted: Iterable[str] | None = None) -> StepPlan:
        return plan_steps(self.kind, self.order, done, wanted)

    def by_task(self) -> dict[str, tuple[str, ...]]:
        """The DAG tasks that run this table, in order, each with its steps (in table order)."""
        out: dict[str, list[str]] = {}
        for s in self.steps:
            out.setdefault(s.task, []).append(str(s.name))
        return {task: tuple(steps) for task, steps in out.items()}


@dataclass(frozen=True)
class StepOutcome:
    """A step just finished, as the runner hands it to the table's recorder."""

    step: str
    summary: Summary
    duration_s: float
    finished_at_ms: int

    def as_report(self) -> dict[str, Any]:
        """The run report's entry for the step (``this_run`` / ``steps``)."""
        return {"status": "done", "duration_s": round(self.duration_s, 3), "summary": self.summary}
