"""Commit translated offsets to destination groups: the act a promotion (whole, per group) and a catch-up run end with.

Translation only decides (``translation.translate``); this module changes the destination. A group with members
is refused (the broker would refuse too, and its consumers own their offsets); an offset already there is
skipped; a destination offset ahead of the decision is kept unless a rewind is allowed, so a consumer that
already moved on the destination is never sent back by a late run. Running it again commits nothing new.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafka_ferry.core.common.cluster_model import GroupInfo
from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.offsets.offset_decisions import OffsetDecision
from kafka_ferry.kafka.protocol import Cluster

log = logging.getLogger(__name__)


@dataclass
class GroupCommit:
    """What happened to one destination group: committed offsets, skipped partitions, or a refusal."""

    group: str
    committed: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> offset
    skipped: dict[str, str] = field(default_factory=dict)  # "topic:partition" -> reason
    refused: str | None = None

    def as_dict(self) -> dict:
        return {"group": self.group, "committed": self.committed, "skipped": self.skipped, "refused": self.refused}


class GroupCommitRefused(Retryable, RuntimeError):
    """A destination group could not be committed (members present, broker refusal)."""


def commit_translated_offsets(destination: Cluster, decisions: Iterable[OffsetDecision],
                              allow_rewind: bool = False, strict: bool = False) -> list[GroupCommit]:
    """Commit translations to destination groups that have no members; ``strict`` raises on any refusal."""
    by_group: dict[str, list[OffsetDecision]] = defaultdict(list)
    for d in decisions:
        if d.downstream_offset is not None:
            by_group[d.group].append(d)
    # Every group's members and offsets are read together (two rounds of requests, not two per group); a group's
    # commit is still refused by the broker if a member joined since (alter_group_offsets fails, refused below).
    infos = destination.describe_groups(by_group)
    current = destination.groups_offsets(by_group)
    planned = [_plan_group(g, ds, allow_rewind, infos.get(g), current[g]) for g, ds in sorted(by_group.items())]
    errors = destination.alter_groups_offsets({o.group: (offsets, metadata) for o, offsets, metadata in planned
                                               if offsets})  # every group's commit in flight at once
    outcomes = []
    for outcome, offsets, _ in planned:
        error = errors.get(outcome.group)
        if error is not None:
            outcome.refused, outcome.committed = f"broker refused: {error}", {}
            log.warning("commit: group %s refused: %s", outcome.group, outcome.refused)
        elif offsets:
            for name, offset in outcome.committed.items():
                log.debug("commit: group %s %s -> %d", outcome.group, name, offset)
        outcomes.append(outcome)
    _log_summary(outcomes)
    refused = [o for o in outcomes if o.refused]
    if strict and refused:
        raise GroupCommitRefused("; ".join(f"group {o.group}: {o.refused}" for o in refused))
    return outcomes


def _plan_group(group: str, decisions: list[OffsetDecision], allow_rewind: bool, info: GroupInfo | None,
                current: dict[tuple[str, int], int]
                ) -> tuple[GroupCommit, dict[tuple[str, int], int], dict[tuple[str, int], str]]:
    """What to commit to one group: (its outcome so far, offsets, metadata); nothing when it has members."""
    outcome = GroupCommit(group)
    if info is not None and info.is_active:
        outcome.refused = f"{info.describe()}: commit only while the group is empty"
        log.warning("commit: group %s refused: %s", group, outcome.refused)
        return outcome, {}, {}
    offsets: dict[tuple[str, int], int] = {}
    metadata: dict[tuple[str, int], str] = {}
    for d in decisions:
        tp, name = (d.destination_topic, d.partition), f"{d.destination_topic}:{d.partition}"
        target = d.downstream_offset
        if target is None:  # the caller keeps only translated decisions: nothing to commit for this one
            continue
        now = current.get(tp)
        if now == target:
            outcome.skipped[name] = f"already at {now}"
        elif now is not None and now > target and not allow_rewind:
            outcome.skipped[name] = f"destination at {now} is ahead of {target}: not rewinding"
        else:
            offsets[tp], metadata[tp] = target, d.metadata
            outcome.committed[name] = target
    for name, reason in outcome.skipped.items():
        log.debug("commit: group %s %s skipped: %s", group, name, reason)
    return outcome, offsets, metadata


def _log_summary(outcomes: list[GroupCommit]) -> None:
    """One line for every group's commit (each partition at debug: 2,000 partitions are 4,000 lines otherwise),
    and the groups a commit did not rewind named: those are the ones a person looks at."""
    committed = sum(len(o.committed) for o in outcomes if not o.refused)
    skipped = sum(len(o.skipped) for o in outcomes)
    ahead = {o.group: [n for n, why in o.skipped.items() if why.startswith("destination at")] for o in outcomes}
    ahead = {g: names for g, names in ahead.items() if names}
    log.info("commit: %d group(s): %d partition(s) committed, %d already there or not rewound", len(outcomes),
             committed, skipped)
    for group, names in sorted(ahead.items())[:10]:
        log.info("commit: group %s is ahead on the destination on %d partition(s), not rewound: %s%s", group,
                 len(names), ", ".join(names[:5]), " ..." if len(names) > 5 else "")
    if len(ahead) > 10:
        log.info("commit: and %d more group(s) ahead on the destination, not rewound", len(ahead) - 10)
