"""Units that must move together: topics and groups a staged cutover may not split.

Why: a tenant's topics are not independent. A transactional producer writes several topics in one transaction;
a Kafka Streams application reads, keeps state and writes under one ``application.id``. Promoting part of such a
unit (its producer moves while another of its topics stays on the source, or its group moves without its changelog)
corrupts the application's output or state, silently. So every unit is declared here once, as a
:class:`CoupledUnit` saying WHY its members belong together, and a staged step (``promote-topics`` /
``promote-groups``) that would split one is refused before anything changes, unless the spec accepts that split
explicitly (``coupling.accept_split``, per unit). The whole-migration promotion moves every topic and group at
once, so it keeps every unit whole by construction and never asks.

Where units come from (all fed in by the layers above; this module is pure):
  * ``transaction_units``: ``__transaction_state`` read on the source (``core.units.transaction_log`` decodes it): the
    topics each ``transactional.id`` wrote, joined when two ids share a topic;
  * the spec's ``coupling.units`` (declared when the log cannot be read, or for any other reason);
  * Kafka Streams applications (built on top of this module by their own stage).

Invariants (tests assert them):
  E. ``unit_splits`` reports a unit exactly when the step moves at least one of its members that is not promoted
     yet and leaves at least one member neither moving nor promoted; what moves and what is left partition the
     unit's members that are not promoted yet.
  F. ``check_unit_splits`` refuses every split unit not accepted by name, naming each (its reason, what would be
     left behind, the way out), and never refuses a step that moves every unit whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_ferry.core.cutover.staged_cutover import SHOWN, StagedCutoverError

TRANSACTIONS_PREFIX = "transactions:"  # the name of a unit found in __transaction_state: the prefix, then its ids


class UnitSplitRefused(StagedCutoverError):
    """A staged step would move part of a coupled unit and the spec does not accept that split.

    Permanent (as every ``StagedCutoverError``): the same selection against the same units is refused again; the
    way out is to include the rest of the unit or accept the split in the spec."""


@dataclass(frozen=True)
class CoupledUnit:
    """Topics (source names) and groups that must be promoted together, and why.

    ``reason`` is said in every refusal: "transactional.id payments-tx writes both", "declared in the spec",
    "Kafka Streams application wordcount"."""

    name: str
    topics: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    reason: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a coupled unit needs a name")
        object.__setattr__(self, "topics", frozenset(self.topics))
        object.__setattr__(self, "groups", frozenset(self.groups))

    @property
    def size(self) -> int:
        return len(self.topics) + len(self.groups)

    def as_dict(self) -> dict[str, Any]:
        """The unit as the pre-flight's XCom and ``--json`` show it."""
        return {"name": self.name, "topics": sorted(self.topics), "groups": sorted(self.groups),
                "reason": self.reason}


@dataclass(frozen=True)
class UnitSplit:
    """How a step would split ``unit``: what it moves, and what it would leave behind (neither moving nor
    promoted before)."""

    unit: CoupledUnit
    moving_topics: frozenset[str]
    moving_groups: frozenset[str]
    left_topics: frozenset[str]
    left_groups: frozenset[str]

    def describe(self) -> str:
        """One line: the unit, its reason, what moves and what stays."""
        moving = _members(self.moving_topics, self.moving_groups)
        return (f"unit {self.unit.name!r} ({self.unit.reason}): this step moves {moving} and would leave "
                f"{_members(self.left_topics, self.left_groups)} behind")

    def as_dict(self) -> dict[str, Any]:
        return {"unit": self.unit.name, "reason": self.unit.reason,
                "moving": {"topics": sorted(self.moving_topics), "groups": sorted(self.moving_groups)},
                "left": {"topics": sorted(self.left_topics), "groups": sorted(self.left_groups)}}


def _names(kind: str, names: Iterable[str]) -> str:
    listed = sorted(names)
    if not listed:
        return ""
    more = f" and {len(listed) - SHOWN} more" if len(listed) > SHOWN else ""
    return f"{kind}{'s' if len(listed) > 1 else ''} {', '.join(listed[:SHOWN])}{more}"


def _members(topics: Iterable[str], groups: Iterable[str]) -> str:
    return " and ".join(p for p in (_names("topic", topics), _names("group", groups)) if p) or "nothing"


def unit_splits(units: Iterable[CoupledUnit], topics: Iterable[str] = (), groups: Iterable[str] = (),
                promoted_topics: Iterable[str] = (), promoted_groups: Iterable[str] = ()) -> list[UnitSplit]:
    """The units a staged step moving ``topics`` and ``groups`` would split (invariant E), by unit name.

    A member promoted earlier has moved already: it is neither moving nor left. A unit the step does not touch is
    not split by it (it stays whole on the source), nor is a unit whose last members this step moves."""
    moving_t, moving_g = set(topics), set(groups)
    done_t, done_g = set(promoted_topics), set(promoted_groups)
    out = []
    for unit in sorted(units, key=lambda u: u.name):
        todo_t, todo_g = unit.topics - done_t, unit.groups - done_g
        in_t, in_g = todo_t & moving_t, todo_g & moving_g
        left_t, left_g = todo_t - in_t, todo_g - in_g
        if (in_t or in_g) and (left_t or left_g):
            out.append(UnitSplit(unit, frozenset(in_t), frozenset(in_g), frozenset(left_t), frozenset(left_g)))
    return out


def check_unit_splits(units: Iterable[CoupledUnit], topics: Iterable[str] = (), groups: Iterable[str] = (),
                      promoted_topics: Iterable[str] = (), promoted_groups: Iterable[str] = (),
                      accepted: Iterable[str] = (), step: str = "staged promotion") -> list[UnitSplit]:
    """Refuse (invariant F) a step that splits a unit the spec does not accept splitting; return the accepted
    splits (the caller logs them). One message names every refused unit, its reason, what would be left behind
    and the two ways out."""
    splits = unit_splits(units, topics, groups, promoted_topics, promoted_groups)
    ok = set(accepted)
    refused = [s for s in splits if s.unit.name not in ok]
    if refused:
        shown = "; ".join(s.describe() for s in refused[:SHOWN])
        more = f"; and {len(refused) - SHOWN} more unit(s)" if len(refused) > SHOWN else ""
        names = ", ".join(repr(s.unit.name) for s in refused)
        raise UnitSplitRefused(
            f"{step} refused before any change: it would split coupled unit(s): {shown}{more}. Either include the "
            f"rest of each unit in this step, or accept the split in the spec (coupling.accept_split: [{names}]) "
            "if its members may run on different clusters for a while")
    return [s for s in splits if s.unit.name in ok]


def transaction_units(writes: Mapping[str, Iterable[str]], selected_topics: Iterable[str]) -> list[CoupledUnit]:
    """Units from ``__transaction_state``: ``writes`` maps each transactional.id to the topics its transactions
    wrote; topics connected through a shared id (or a chain of ids) form one unit. Only the migration's
    ``selected_topics`` count (a topic it does not move cannot be split from it by a staged step), and a unit
    needs two of them. Named ``transactions:<ids>`` (sorted, comma-separated, the first five and how many more),
    so ``coupling.accept_split`` can name it; the reason names the ids too."""
    selected = set(selected_topics)
    parent: dict[str, str] = {}

    def find(t: str) -> str:
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    ids_of: dict[str, set[str]] = {}
    for tid, written in writes.items():
        mine = sorted(set(written) & selected)
        for t in mine:
            parent.setdefault(t, t)
            ids_of.setdefault(t, set()).add(tid)
        for t in mine[1:]:
            a, b = find(mine[0]), find(t)
            if a != b:
                parent[max(a, b)] = min(a, b)
    components: dict[str, set[str]] = {}
    for t in parent:
        components.setdefault(find(t), set()).add(t)
    out = []
    for members in components.values():
        if len(members) < 2:
            continue
        ids = sorted(set().union(*(ids_of[t] for t in members)))
        shown = ", ".join(ids[:SHOWN]) + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")
        verb = "writes" if len(ids) == 1 else "write"
        named = ",".join(ids[:SHOWN]) + (f",+{len(ids) - SHOWN} more" if len(ids) > SHOWN else "")
        out.append(CoupledUnit(name=TRANSACTIONS_PREFIX + named, topics=frozenset(members),
                               reason=f"transactional.id {shown} {verb} them in the same transactions"))
    return sorted(out, key=lambda u: u.name)


def writers_beyond(writes: Mapping[str, Iterable[str]], selected_topics: Iterable[str]) -> dict[str, list[str]]:
    """The transactional.ids that write both topics the migration moves and topics it does not, with the latter:
    promoting the migration's topics moves that producer while part of its transactions stays behind on the
    source (the pre-flight says it; the unit check cannot, as the other topics are no part of the migration)."""
    selected = set(selected_topics)
    out = {}
    for tid, written in sorted(writes.items()):
        written = set(written)
        if written & selected and written - selected:
            out[tid] = sorted(written - selected)
    return out
