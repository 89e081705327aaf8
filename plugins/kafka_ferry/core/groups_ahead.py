"""Destination groups ahead of a promotion's final translation: a state no wait and no retry can leave.

Why decide it: the promotion commits each migrated group's translated offset on the destination but never moves a
group backwards unless the run allows a rewind (``promotion.commit``), and the ``group_offsets_synced`` gate then
waits for the committed offsets to equal the translation. A group whose consumers moved on on the destination (an
earlier promotion, then a reset) is ahead of the translation for good: the gate would wait out its whole timeout for
offsets nothing will move. So the commit step and the gate decide it from the offsets alone and refuse in one try,
naming the way out (``allow_rewind``, or leaving the destination as the system of record).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafka_ferry.core.failures import Permanent

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


def ahead_message(migration: str, ahead: list[GroupAhead], limit: int = 5) -> str:
    """Why the promotion cannot finish with these groups, and the two ways out; ``ahead`` is not empty."""
    shown = "; ".join(a.describe() for a in ahead[:limit]) + (
        f"; and {len(ahead) - limit} more" if len(ahead) > limit else "")
    groups = sorted({a.group for a in ahead})
    return (f"promotion of {migration!r} cannot finish: {len(ahead)} partition(s) of destination group(s) "
            f"{', '.join(groups)} are committed past the final translation ({shown}); their consumers moved on on "
            "the destination, and the promotion never moves a group backwards unless asked, so waiting would not "
            "help. Nothing was committed to these groups. Either trigger mode 'promote' again with "
            "allow_rewind set (kafka-ferry promote --allow-rewind), which commits them at the translation (their "
            "consumers then re-read on the destination from there), or keep the destination as it is and do not "
            "promote again")


def refuse_groups_ahead(migration: str, expected: Mapping[str, Offsets], committed: Mapping[str, Offsets]) -> None:
    """Raise ``DestinationGroupsAhead`` when any group partition is ahead of the translation."""
    ahead = groups_ahead(expected, committed)
    if ahead:
        raise DestinationGroupsAhead(ahead_message(migration, ahead))
