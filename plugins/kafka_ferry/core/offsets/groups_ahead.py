"""Destination groups ahead of a promotion's final translation: a state no wait and no retry can leave.

Why decide it: the promotion commits each migrated group's translated offset on the destination but never moves a
group backwards unless the run allows a rewind (``promotion.commit``), and the ``group_offsets_synced`` gate then
waits for the committed offsets to equal the translation. A group whose consumers moved on on the destination (an
earlier promotion, then a reset) is ahead of the translation for good: the gate would wait out its whole timeout for
offsets nothing will move. So the commit step and the gate decide it from the offsets alone and refuse in one try,
naming the way out (``allow_rewind``, or leaving the destination as the system of record).

The pre-flight decides it earlier, before the final copy writes anything (``settled_translation``): a translation
that points at a record the copy has placed already cannot change with more copying, so when the group has no
members on the source (its commit is final) the destination offset compared with it decides now. The other
translations (past the copied end, after every counterpart) are left to the commit step, after the final copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.cutover.rollback_plan import COPIED_BACK_RECORD, FORWARD_RECORD
from kafka_ferry.core.offsets.offset_decisions import BELOW_LOG_START, FIRST_COPIED_RECORD, OffsetDecision
from kafka_ferry.core.offsets.offset_translation import TranslationMethod

Offsets = Mapping[tuple[str, int], int]


@dataclass(frozen=True, order=True)
class GroupAhead:
    """One group partition committed on the destination past the offset the translation wants there."""

    group: str
    destination_topic: str
    partition: int
    committed: int
    translation: int

    def describe(self) -> str:
        return (f"group {self.group} {self.destination_topic}-{self.partition} committed at {self.committed}, "
                f"translation {self.translation}")


class DestinationGroupsAhead(Permanent, RuntimeError):
    """Destination groups committed past the final translation while rewinding is not allowed; no retry helps."""


# Translation methods whose answer is a record the copy placed already (its copy, or a copied-back record's
# original): a later copy only appends after it, so the final translation gives the same offset. Not settled:
# at or ahead of the copied end, nothing copied, after every counterpart (the next record is still to come).
SETTLED_METHODS = frozenset({TranslationMethod.EXACT_RUN, TranslationMethod.HOLE_NEXT_RECORD, FIRST_COPIED_RECORD,
                             BELOW_LOG_START, FORWARD_RECORD, COPIED_BACK_RECORD})


def settled_translation(decisions: Iterable[OffsetDecision], active: Iterable[str] = ()) -> dict[str, Offsets]:
    """Per group, the offsets a promotion will commit that neither its final copy nor waiting can change: decisions
    by a settled method for groups without members on the source (``active``: groups with members, whose commit may
    still move forward)."""
    busy = set(active)
    out: dict[str, dict[tuple[str, int], int]] = {}
    for d in decisions:
        if d.group not in busy and d.method in SETTLED_METHODS and d.downstream_offset is not None:
            out.setdefault(d.group, {})[(d.destination_topic, d.partition)] = d.downstream_offset
    return dict(out)


def groups_ahead(expected: Mapping[str, Offsets], committed: Mapping[str, Offsets]) -> list[GroupAhead]:
    """Every group partition whose committed destination offset is past the translation's (sorted).

    A partition not committed yet, or committed behind the translation, is not ahead: the commit moves it forward.
    """
    out = []
    for group, wanted in expected.items():
        now = committed.get(group) or {}
        for (topic, partition), want in wanted.items():
            have = now.get((topic, partition))
            if have is not None and have > want:
                out.append(GroupAhead(group, topic, partition, have, want))
    return sorted(out)


def ahead_message(migration: str, ahead: list[GroupAhead], limit: int = 5, mode: str = "promote") -> str:
    """Why the promotion cannot finish with these groups, and the two ways out; ``ahead`` is not empty. ``mode``: the
    form's mode that promotes them (``promote``, ``promote-groups``), also the command's name."""
    shown = "; ".join(a.describe() for a in ahead[:limit]) + (
        f"; and {len(ahead) - limit} more" if len(ahead) > limit else "")
    groups = sorted({a.group for a in ahead})
    return (f"promotion of {migration!r} cannot finish: {len(ahead)} partition(s) of destination group(s) "
            f"{', '.join(groups)} are committed past the final translation ({shown}); their consumers moved on on "
            "the destination, and the promotion never moves a group backwards unless asked, so waiting would not "
            f"help. Nothing was committed to these groups. Either trigger mode {mode!r} again with "
            f"allow_rewind set (kafka-ferry {mode} --allow-rewind), which commits them at the translation (their "
            "consumers then re-read on the destination from there), or keep the destination as it is and do not "
            "promote again")


def refuse_groups_ahead(migration: str, expected: Mapping[str, Offsets], committed: Mapping[str, Offsets],
                        mode: str = "promote") -> None:
    """Raise ``DestinationGroupsAhead`` when any group partition is ahead of the translation."""
    ahead = groups_ahead(expected, committed)
    if ahead:
        raise DestinationGroupsAhead(ahead_message(migration, ahead, mode=mode))
