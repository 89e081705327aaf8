"""The designed outcome of every route: each mode of the trigger form in each state a migration can be in.

Why one table, as data: a step proven alone says nothing about the route a user takes (issue 35: a rollback after a
whole promotion failed in ``provision_topics``, a task the rollback never needed). The route matrix test
(``tests/integration/test_route_matrix.py``) runs every cell through ``dag.test(run_conf=...)`` as the trigger form
sends it and asserts the outcome written here; the table in ``docs/operations.md`` is generated from here
(``python -m kafka_ferry.core.cutover.routes write docs/operations.md``, ``make routes-table``; a unit test fails while
it is stale). So the manual, the test and this module cannot tell three different stories.

Each cell is one of:
  works    the mode does its work (``changes`` says what) and the migration is then in state ``to``
  no-op    the run succeeds and changes nothing: the work was done already (``note`` says which)
  plan     a dry run: the run succeeds, shows what the mode would do, changes nothing
  refused  the run fails in one try of ``task``, before anything changes anywhere; the message says why
           (``why``) and the way out (``way_out``); both are fragments the test finds in the failure

The form's fields per cell are fixed (``conf``): a confirmed mode types the migration's name, ``promote-groups`` names
the migration's first group, ``promote-topics`` its first topic (the group reading it is that group), the rollback
modes name nothing (the whole migration). Message fragments may hold ``{group}`` and ``{topic}``: those names.

Pure: no Airflow, no Kafka.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the form's modes are the route table's columns, re-exported: a reader of the table names them through routes
from kafka_ferry.core.specs.trigger_form import CATCH_UP as CATCH_UP
from kafka_ferry.core.specs.trigger_form import (
    CONFIRM_FIELD,
    CONFIRMED_MODES,
    GROUPS_FIELD,
    MODES,
    TOPICS_FIELD,
    WAIVE_FIELD,
)
from kafka_ferry.core.specs.trigger_form import DRY_RUN as DRY_RUN
from kafka_ferry.core.specs.trigger_form import PROMOTE as PROMOTE
from kafka_ferry.core.specs.trigger_form import PROMOTE_GROUPS as PROMOTE_GROUPS
from kafka_ferry.core.specs.trigger_form import PROMOTE_TOPICS as PROMOTE_TOPICS
from kafka_ferry.core.specs.trigger_form import ROLLBACK as ROLLBACK
from kafka_ferry.core.specs.trigger_form import ROLLBACK_PLAN as ROLLBACK_PLAN

# The ACL migration's task (``acls.migrate``): part of the provisioning chain the route branch runs for every mode but
# the rollback ones, so its cells are provision_groups's (dag_factory wires it under this id)
ACL_TASK = "migrate_acls"
REWIND_FIELD = "allow_rewind"  # the form's field (dag_promotion.trigger_params); promote and promote-groups read it

NEW, CAUGHT_UP, GROUPS_STAGED, TOPICS_STAGED = "new", "caught up", "groups staged", "topics staged"
PROMOTED, ROLLED_BACK, CAUGHT_UP_AGAIN, PROMOTED_AGAIN = (
    "promoted", "rolled back", "rolled back and caught up again", "promoted again")
STATES = (NEW, CAUGHT_UP, GROUPS_STAGED, TOPICS_STAGED, PROMOTED, ROLLED_BACK, CAUGHT_UP_AGAIN, PROMOTED_AGAIN)

# What each state is, for the table's readers (and the test that builds it)
STATE_MEANINGS: dict[str, str] = {
    NEW: "the spec is deployed; no run changed anything yet",
    CAUGHT_UP: "catch-up runs copied the topics and committed the groups' offsets on the destination",
    GROUPS_STAGED: "`promote-groups` moved a group; its consumers read the destination, producers still write to "
                   "the source",
    TOPICS_STAGED: "`promote-topics` also moved the topic that group reads; its producers write to the destination",
    PROMOTED: "`promote` moved the whole migration; the destination is the system of record",
    ROLLED_BACK: "`rollback` copied back what was produced on the destination and committed every group on the "
                 "source where it stopped",
    CAUGHT_UP_AGAIN: "catch-up runs copied again after the rollback",
    PROMOTED_AGAIN: "`promote` moved the whole migration a second time",
}

WORKS, NO_OP, PLAN, REFUSED = "works", "no-op", "plan", "refused"


@dataclass(frozen=True)
class Outcome:
    """The designed outcome of one cell (see the module docstring)."""

    kind: str
    changes: str = ""   # works: what the run changes
    to: str = ""        # works: the state after it
    note: str = ""      # no-op / plan: what the run shows or why nothing is left to do
    task: str = ""      # refused: the task that fails, in one try
    why: str = ""       # refused: a fragment of the message saying why
    way_out: str = ""   # refused: a fragment of the message naming what to do instead

    def __post_init__(self) -> None:
        if self.kind not in (WORKS, NO_OP, PLAN, REFUSED):
            raise ValueError(f"outcome kind {self.kind!r} is not one of works, no-op, plan, refused")
        if self.kind == WORKS and (not self.changes or self.to not in STATES):
            raise ValueError(f"a 'works' outcome needs what it changes and a state to go to, got {self!r}")
        if self.kind == REFUSED and not (self.task and self.why and self.way_out):
            raise ValueError(f"a 'refused' outcome needs its task, why and way out, got {self!r}")

    @property
    def changes_nothing(self) -> bool:
        """A cell the test may run against a state without spending it: nothing changes on either cluster."""
        return self.kind != WORKS

    def message_fragments(self, group: str, topic: str) -> tuple[str, str]:
        """``why`` and ``way_out`` with the migration's group and topic filled in."""
        return self.why.format(group=group, topic=topic), self.way_out.format(group=group, topic=topic)


def works(changes: str, to: str) -> Outcome:
    return Outcome(WORKS, changes=changes, to=to)


def refused(task: str, why: str, way_out: str) -> Outcome:
    return Outcome(REFUSED, task=task, why=why, way_out=way_out)


# Refusals shared by several cells
_NOT_COPIED = "nothing was copied yet"
_RUN_CATCH_UP = "run mode catch-up first"
_PROMOTED = "was promoted at"
_ROLL_BACK = "then mode 'rollback'"
NOT_PROMOTED = refused("rollback", "is not promoted: nothing to roll back", "nothing to roll back")
STAGED_GROUP_ROLLBACK = refused("rollback", "is not promoted as a whole", "{group}")
STAGED_TOPIC_ROLLBACK = refused("rollback", "is not promoted as a whole", "{topic}")
TOPIC_BLOCKED = refused("preflight", "read by unpromoted group(s) {group}", "Promote those groups first")
# a promoted migration: every mode but the rollback ones stops in the pre-flight, naming the rollback (never only
# reset-promotion, which would drop what the rollback reads)
PROMOTED_REFUSED = refused("preflight", _PROMOTED, _ROLL_BACK)

_COPY = "copies the next batch (mirrors provisioned), translates and commits the unpromoted groups' offsets"
_PROMOTE = ("waits for the source to be quiet, copies to lag 0, commits every group on the destination, reconciles, "
            "marks the migration promoted")
_GROUP = "moves the group: copies its topic to the source's end, commits it on the destination, marks it promoted"
_ROLLBACK = ("once the destination is quiet, copies back what was produced there, commits every group on the source "
             "where it stopped, marks the migration rolled back")
_ROLLBACK_PLAN = "the records a rollback would copy back and where each group would resume on the source"
_DRY = "the pre-flight diff and the next batch; nothing is created or recorded"
_ROLLED_BACK = "rolled back already: every step of the last rollback is done"


ROUTES: dict[str, dict[str, Outcome]] = {
    NEW: {
        CATCH_UP: works("creates the mirrors and the state topic, records the groups, copies the first batch, "
                        "translates and commits the groups' offsets", CAUGHT_UP),
        PROMOTE: refused("preflight", _NOT_COPIED, _RUN_CATCH_UP),
        PROMOTE_GROUPS: refused("preflight", _NOT_COPIED, _RUN_CATCH_UP),
        PROMOTE_TOPICS: refused("preflight", _NOT_COPIED, _RUN_CATCH_UP),
        DRY_RUN: Outcome(PLAN, note=_DRY),
        ROLLBACK: NOT_PROMOTED,
        ROLLBACK_PLAN: NOT_PROMOTED,
    },
    CAUGHT_UP: {
        CATCH_UP: works(_COPY, CAUGHT_UP),
        PROMOTE: works(_PROMOTE, PROMOTED),
        PROMOTE_GROUPS: works(_GROUP, GROUPS_STAGED),
        PROMOTE_TOPICS: TOPIC_BLOCKED,
        DRY_RUN: Outcome(PLAN, note=_DRY),
        ROLLBACK: NOT_PROMOTED,
        ROLLBACK_PLAN: NOT_PROMOTED,
    },
    GROUPS_STAGED: {
        CATCH_UP: works(_COPY + " (never the promoted group's)", GROUPS_STAGED),
        PROMOTE: works(_PROMOTE + " (the staged group stays as its consumers left it)", PROMOTED),
        PROMOTE_GROUPS: Outcome(NO_OP, note="the group is promoted already"),
        PROMOTE_TOPICS: works("moves the topic: waits until its source end stops moving, copies it to lag 0, "
                              "reconciles, marks it promoted (catch-up leaves it out from now on)", TOPICS_STAGED),
        DRY_RUN: Outcome(PLAN, note=_DRY),
        ROLLBACK: STAGED_GROUP_ROLLBACK,
        ROLLBACK_PLAN: STAGED_GROUP_ROLLBACK,
    },
    TOPICS_STAGED: {
        CATCH_UP: works(_COPY + " (never the promoted topic, never the promoted group)", TOPICS_STAGED),
        PROMOTE: works(_PROMOTE + " (the staged units stay as they are)", PROMOTED),
        PROMOTE_GROUPS: Outcome(NO_OP, note="the group is promoted already"),
        PROMOTE_TOPICS: Outcome(NO_OP, note="the topic is promoted already"),
        DRY_RUN: Outcome(PLAN, note=_DRY),
        ROLLBACK: STAGED_TOPIC_ROLLBACK,
        ROLLBACK_PLAN: STAGED_TOPIC_ROLLBACK,
    },
    PROMOTED: {
        CATCH_UP: PROMOTED_REFUSED,
        PROMOTE: PROMOTED_REFUSED,
        PROMOTE_GROUPS: PROMOTED_REFUSED,
        PROMOTE_TOPICS: PROMOTED_REFUSED,
        DRY_RUN: PROMOTED_REFUSED,
        ROLLBACK: works(_ROLLBACK + " (the staged units' marks too)", ROLLED_BACK),
        ROLLBACK_PLAN: Outcome(PLAN, note=_ROLLBACK_PLAN),
    },
    ROLLED_BACK: {
        CATCH_UP: works(_COPY + " (every group and topic again: nothing is promoted)", CAUGHT_UP_AGAIN),
        PROMOTE: works(_PROMOTE, PROMOTED_AGAIN),
        PROMOTE_GROUPS: works(_GROUP, GROUPS_STAGED),
        PROMOTE_TOPICS: TOPIC_BLOCKED,
        DRY_RUN: Outcome(PLAN, note=_DRY),
        ROLLBACK: Outcome(NO_OP, note=_ROLLED_BACK),
        ROLLBACK_PLAN: Outcome(PLAN, note=_ROLLED_BACK + ": nothing to copy back"),
    },
    CAUGHT_UP_AGAIN: {
        CATCH_UP: works(_COPY, CAUGHT_UP_AGAIN),
        PROMOTE: works(_PROMOTE, PROMOTED_AGAIN),
        PROMOTE_GROUPS: works(_GROUP, GROUPS_STAGED),
        PROMOTE_TOPICS: TOPIC_BLOCKED,
        DRY_RUN: Outcome(PLAN, note=_DRY),
        ROLLBACK: Outcome(NO_OP, note=_ROLLED_BACK),
        ROLLBACK_PLAN: Outcome(PLAN, note=_ROLLED_BACK + ": nothing to copy back"),
    },
    PROMOTED_AGAIN: {
        CATCH_UP: PROMOTED_REFUSED,
        PROMOTE: PROMOTED_REFUSED,
        PROMOTE_GROUPS: PROMOTED_REFUSED,
        PROMOTE_TOPICS: PROMOTED_REFUSED,
        DRY_RUN: PROMOTED_REFUSED,
        ROLLBACK: works(_ROLLBACK, ROLLED_BACK),
        ROLLBACK_PLAN: Outcome(PLAN, note=_ROLLBACK_PLAN),
    },
}

# The walk the route matrix takes through the states: each step is a cell that changes the migration, so each
# expensive state is built once (the cells that change nothing run against it before the walk moves on).
CHAIN: tuple[tuple[str, str], ...] = (
    (NEW, CATCH_UP), (CAUGHT_UP, CATCH_UP), (CAUGHT_UP, PROMOTE_GROUPS), (GROUPS_STAGED, CATCH_UP),
    (GROUPS_STAGED, PROMOTE_TOPICS), (TOPICS_STAGED, CATCH_UP), (TOPICS_STAGED, PROMOTE), (PROMOTED, ROLLBACK),
    (ROLLED_BACK, CATCH_UP), (CAUGHT_UP_AGAIN, CATCH_UP), (CAUGHT_UP_AGAIN, PROMOTE), (PROMOTED_AGAIN, ROLLBACK),
)

# Cells that change the migration but lie off the walk (taking each would cost another promotion or rollback run):
# the same transition from an equivalent state is on the walk, or another test proves it through the DAG.
OFF_CHAIN: dict[tuple[str, str], str] = {
    (CAUGHT_UP, PROMOTE): "the walk's promote from 'rolled back and caught up again'; "
                          "tests/integration/test_promotion_dag.py (dag.test, promote of a caught-up migration)",
    (GROUPS_STAGED, PROMOTE): "the walk's promote from 'topics staged' (a staged group and topic, the rest not)",
    (ROLLED_BACK, PROMOTE): "the walk's promote from 'rolled back and caught up again' (after the rollback)",
    (ROLLED_BACK, PROMOTE_GROUPS): "the walk's promote-groups from 'caught up'",
    (CAUGHT_UP_AGAIN, PROMOTE_GROUPS): "the walk's promote-groups from 'caught up'",
}


# A condition no state above shows: after the migration went back to the source (a rollback, or a promotion reset
# with --give-up-rollback), a group's consumers moved on on the destination, past the offset a promotion would commit
# it at. No wait moves it back, and the promotion never rewinds unless asked: the promote modes naming that group
# are refused in the pre-flight, before the final copy writes anything (``core.offsets.groups_ahead``). The matrix
# checks these cells in ``AHEAD_STATE`` (the walk's last state), with the first group moved on on the destination.
AHEAD_STATE = ROLLED_BACK
AHEAD_MEANING = ("the migration was rolled back or its promotion reset, then the consumers of a group read on "
                 "on the destination, past the offset a promotion would commit it at")
_AHEAD = "committed past the final translation"
GROUP_AHEAD: dict[str, Outcome] = {
    PROMOTE: refused("preflight", _AHEAD, "kafka-ferry promote --allow-rewind"),
    PROMOTE_GROUPS: refused("preflight", _AHEAD, "kafka-ferry promote-groups --allow-rewind"),
}


def outcome(state: str, mode: str) -> Outcome:
    """The designed outcome of ``mode`` in ``state``; an unknown name is an error naming it."""
    if state not in ROUTES:
        raise KeyError(f"state {state!r} is not one of {', '.join(STATES)}")
    if mode not in ROUTES[state]:
        raise KeyError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    return ROUTES[state][mode]


def cells() -> list[tuple[str, str, Outcome]]:
    """Every (state, mode, outcome), states in their order, modes in the form's order."""
    return [(s, m, ROUTES[s][m]) for s in STATES for m in MODES]


def conf(mode: str, migration: str, group: str, topic: str) -> dict[str, Any]:
    """The run conf the trigger form sends for ``mode`` in a cell: every field of the form, those a user fills in for
    the mode filled in, the others at their defaults."""
    return {"mode": mode, CONFIRM_FIELD: migration if mode in CONFIRMED_MODES else None, REWIND_FIELD: False,
            GROUPS_FIELD: [group] if mode == PROMOTE_GROUPS else [], TOPICS_FIELD: [topic] if mode == PROMOTE_TOPICS
            else [], WAIVE_FIELD: []}


# --- the table in docs/operations.md -------------------------------------------------------------------------------
BEGIN = "<!-- BEGIN route matrix: generated by `make routes-table` from plugins/kafka_ferry/core/cutover/routes.py -->"
END = "<!-- END route matrix -->"


def _cell_text(o: Outcome) -> str:
    if o.kind == WORKS:
        return f"works → *{o.to}*"
    if o.kind == REFUSED:
        return f"refused in `{o.task}`"
    return o.kind


def render_table(modes: Sequence[str] = MODES) -> str:
    """The generated block: what each state means, a row per state and a column per mode, then per cell what the
    mode changes where it works, what a refusal says and what a no-op or plan shows."""
    lines = [BEGIN, "", "States:", ""]
    lines += [f"- *{s}*: {STATE_MEANINGS[s]}." for s in STATES]
    lines += ["", "| state | " + " | ".join(f"`{m}`" for m in modes) + " |", "|---|" + "---|" * len(modes)]
    lines += [f"| *{s}* | " + " | ".join(_cell_text(ROUTES[s][m]) for m in modes) + " |" for s in STATES]
    lines += ["", "Per cell:", ""]
    for s, m, o in cells():
        if o.kind == WORKS:
            text = f"{o.changes}."
        elif o.kind == REFUSED:
            text = f"fails in one try of `{o.task}`, nothing changed; the message says “…{o.why}…” and “…{o.way_out}…”."
        else:
            text = f"{o.note}; nothing changes."
        lines.append(f"- `{m}` in *{s}* ({o.kind}): {text}")
    lines += ["", f"With a destination group ahead ({AHEAD_MEANING}; checked in *{AHEAD_STATE}*), the modes that "
              "would promote it stop before anything changes; `allow_rewind` (`--allow-rewind`) lets them commit "
              "it back at the translation:", ""]
    for m, o in GROUP_AHEAD.items():
        lines.append(f"- `{m}` naming a group that is ahead ({o.kind}): fails in one try of `{o.task}`, nothing "
                     f"changed; the message says “…{o.why}…” and “…{o.way_out}…”.")
    lines += ["", "The form's fields per cell: a confirmed mode has the migration's name typed in; `promote-groups` "
              "names one group (`{group}`), `promote-topics` the topic it reads (`{topic}`); the rollback modes "
              "name nothing (the whole migration). `reset-promotion` is no mode of the form: it is a `kafka-ferry` "
              "command.", "", f"With `acls.migrate`, `{ACL_TASK}` runs wherever `provision_groups` runs (after it, "
              "before the mode's own work; the rollback modes reach neither): it creates the ACLs a cell's run finds "
              "missing, none on a later run, and in a dry run only shows them.", "", END]
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """``text`` with its generated block replaced (markers included); a page without the markers is an error."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the page has no generated block: add the lines {BEGIN!r} and {END!r} where it goes")
    return text[:start] + block + text[end + len(END):]


def main(argv: Sequence[str] | None = None) -> int:
    """`write FILE` regenerates the block in FILE; `check FILE` exits 1 when the block is stale."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] not in ("write", "check"):
        print("usage: python -m kafka_ferry.core.cutover.routes write|check docs/operations.md", file=sys.stderr)
        return 2
    path = Path(args[1])
    text = path.read_text()
    wanted = replace_block(text, render_table())
    if args[0] == "write":
        path.write_text(wanted)
        return 0
    if wanted != text:
        print(f"{path}: the route matrix table is stale; run: python -m kafka_ferry.core.cutover.routes write {path} "
              "(make routes-table)")
        return 1
    return 0


def validate(routes: Mapping[str, Mapping[str, Outcome]] = ROUTES) -> list[str]:
    """Every hole in the table: a state or mode without a cell, a chain step that is no 'works' cell or does not
    continue where the last one ended, a 'works' cell neither on the chain nor accounted for in OFF_CHAIN."""
    problems = [f"state {s!r}: no cells" for s in STATES if s not in routes]
    problems += [f"state {s!r}: no cell for mode {m!r}" for s in routes for m in MODES if m not in routes[s]]
    at = NEW
    for s, m in CHAIN:
        o = routes.get(s, {}).get(m)
        if o is None or o.kind != WORKS:
            problems.append(f"chain step {m!r} in {s!r} is no 'works' cell")
            continue
        if s != at:
            problems.append(f"chain step {m!r} starts in {s!r}, but the walk is in {at!r}")
        at = o.to
    on_walk = set(CHAIN)
    for state, by_mode in routes.items():
        for m, o in by_mode.items():
            if o.kind == WORKS and (state, m) not in on_walk and (state, m) not in OFF_CHAIN:
                problems.append(f"{m!r} in {state!r} changes the migration but is neither on the chain nor in "
                                "OFF_CHAIN")
    problems += [f"OFF_CHAIN names {m!r} in {s!r}, which is no 'works' cell"
                 for s, m in OFF_CHAIN if routes.get(s, {}).get(m, Outcome(NO_OP)).kind != WORKS]
    visited = {NEW} | {routes[s][m].to for s, m in CHAIN if s in routes and m in routes[s]}
    problems += [f"the chain never reaches state {s!r}" for s in STATES if s not in visited]
    return problems


if __name__ == "__main__":
    sys.exit(main())
