"""Which destination topics a migration may write to and reconfigure: only the ones it owns.

A destination cluster is shared: a mirror name may already belong to another team's topic. Copying into it,
or giving it the source's ``retention.ms``, would delete or mix that team's records. So, decided before any
change, for every mirror of the topic plan:

  create   the name does not exist: the migration creates it and records it (state kind ``owned-topic``)
  owned    the migration recorded it in an earlier run (``owned-topic``, or ``topic`` from before ownership was
           recorded): provisioned as before (catch-up runs, restarts, renamed destinations)
  adopt    it exists, is not recorded, the spec lists it under ``topics.adopt``, and it is empty or holds only
           records this migration copied (provenance headers naming this migration's source cluster)
  refused  anything else, naming the topic, its record count and the configs that differ

Invariant on top of these, checked on every plan whatever the status: a topic that may hold records the
migration did not write never gets a shorter ``retention.ms`` / ``retention.bytes`` nor another
``cleanup.policy``: those changes delete or compact away records the migration cannot bring back.

Pure: the stage gathers what the destination holds (``TopicContents``) and the recorded ownership.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_ferry.core.common.cluster_model import TopicInfo
from kafka_ferry.core.provisioning.provisioning_plan import TopicAction

CREATE, OWNED, ADOPT, REFUSED = "create", "owned", "adopt", "refused"
CREATED_HOW, ADOPTED_HOW = "created", "adopted"  # the ``how`` of an owned-topic state record
# Configs whose change deletes or compacts away records that are already there.
RETENTION_CONFIGS = ("retention.ms", "retention.bytes")
CLEANUP_POLICY = "cleanup.policy"


@dataclass(frozen=True)
class TopicContents:
    """What an existing destination topic holds: ``records`` offsets between log start and end (all partitions);
    ``foreign`` of them not written by this migration (None: not read, see ``unread``)."""

    records: int
    foreign: int | None = None
    unread: str = ""

    @property
    def may_hold_foreign(self) -> bool:
        return self.foreign > 0 if self.foreign is not None else self.records > 0


@dataclass(frozen=True)
class OwnershipDecision:
    destination_topic: str
    status: str  # CREATE | OWNED | ADOPT | REFUSED
    reason: str
    changes: tuple[str, ...] = ()  # what provisioning would change on an existing topic (adopt, owned)

    def describe(self) -> str:
        changes = f"; would change: {', '.join(self.changes)}" if self.changes else ""
        return f"{self.status} {self.destination_topic}: {self.reason}{changes}"


@dataclass(frozen=True)
class OwnershipPlan:
    decisions: tuple[OwnershipDecision, ...]
    refusals: tuple[str, ...]
    unmatched_adopt: tuple[str, ...] = ()  # topics.adopt names that are no mirror of this migration (a typo?)

    def with_status(self, status: str) -> list[str]:
        return [d.destination_topic for d in self.decisions if d.status == status]

    def as_dict(self) -> dict[str, Any]:
        return {"create": self.with_status(CREATE), "owned": self.with_status(OWNED),
                "adopt": {d.destination_topic: list(d.changes) for d in self.decisions if d.status == ADOPT},
                "refusals": list(self.refusals),
                **({"adopt_unmatched": list(self.unmatched_adopt)} if self.unmatched_adopt else {})}


def config_differences(action: TopicAction, destination: TopicInfo) -> list[str]:
    """Every mirrored config (and the partition count) where the existing topic differs from what the mirror
    needs, as ``name: destination value -> mirror value``, sorted by name."""
    lines = [f"{k}: {destination.configs.get(k)!r} -> {v!r}" for k, v in sorted(action.configs.items())
             if destination.configs.get(k) != v]
    if destination.partitions != action.partitions:
        lines.append(f"partitions: {destination.partitions} -> {action.partitions}")
    return lines


def _limit(value: str | None) -> float | None:
    """A retention limit as a number (-1: unlimited); None when unknown or not a number."""
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        return None
    return float("inf") if number < 0 else float(number)


def shortens(old: str | None, new: str | None) -> bool:
    """True when setting a retention limit from ``old`` to ``new`` may delete records sooner (unknown: True)."""
    if new is None or new == old:
        return False
    new_limit, old_limit = _limit(new), _limit(old)
    if new_limit is None or old_limit is None:
        return True
    return new_limit < old_limit


def destructive_changes(action: TopicAction, destination: TopicInfo) -> list[str]:
    """The changes provisioning would make to ``destination`` that delete or compact away existing records."""
    out = [f"{k} {destination.configs.get(k)!r} -> {action.configs[k]!r} (shorter)" for k in RETENTION_CONFIGS
           if k in action.configs and shortens(destination.configs.get(k), action.configs[k])]
    wanted, current = action.configs.get(CLEANUP_POLICY), destination.configs.get(CLEANUP_POLICY)
    if wanted is not None and _policies(wanted) != _policies(current):
        out.append(f"{CLEANUP_POLICY} {current!r} -> {wanted!r}")
    return out


def _policies(value: str | None) -> frozenset[str]:
    return frozenset(p.strip() for p in (value or "delete").split(",") if p.strip())


def decide_ownership(migration: str, actions: Iterable[TopicAction], destination_topics: Mapping[str, TopicInfo],
                     owned: Iterable[str], adopt: Iterable[str],
                     contents: Mapping[str, TopicContents]) -> OwnershipPlan:
    """One decision per mirror, and every refusal (each names the topic, its records and the differing configs).

    ``owned``: destination topics the migration's state records as created or adopted by it; ``adopt``: the
    spec's ``topics.adopt``; ``contents``: what each existing, not owned mirror holds (a missing entry counts as
    unread, so it may hold records of others).
    """
    owned, adopt = set(owned), set(adopt)
    decisions, refusals = [], []
    for action in actions:
        name = action.destination_topic
        existing = destination_topics.get(name)
        if action.action == CREATE or existing is None:
            decisions.append(OwnershipDecision(name, CREATE, f"created and recorded by migration {migration}"))
            continue
        held = contents.get(name, TopicContents(records=1, unread="not read"))
        differing = config_differences(action, existing)
        if name in owned:
            decision = OwnershipDecision(name, OWNED, f"created by migration {migration} in an earlier run",
                                         tuple(differing))
        elif name in adopt and held.foreign == 0:
            what = "empty" if held.records == 0 else f"holds only records this migration copied ({held.records})"
            decision = OwnershipDecision(name, ADOPT, f"listed in topics.adopt and {what}", tuple(differing))
        else:
            decision = OwnershipDecision(name, REFUSED, _refusal(migration, name, held, differing, name in adopt))
            refusals.append(decision.reason)
        decisions.append(decision)
        # The invariant, whatever the status: another writer's records are never deleted or compacted away.
        if decision.status != OWNED and decision.status != REFUSED and held.may_hold_foreign:
            destructive = destructive_changes(action, existing)
            if destructive:
                refusals.append(f"{name}: may hold records migration {migration} did not write; provisioning "
                                f"would delete or compact them ({', '.join(destructive)}); nothing was changed")
    unmatched = tuple(sorted(adopt - {d.destination_topic for d in decisions}))
    return OwnershipPlan(tuple(decisions), tuple(refusals), unmatched)


def _refusal(migration: str, name: str, held: TopicContents, differing: list[str], adopt_listed: bool) -> str:
    configs = f"configs that differ: {', '.join(differing)}" if differing else "no config differs"
    head = f"{name}: exists on the destination and was not created by migration {migration} " \
           f"({held.records} records; {configs})"
    if not adopt_listed:
        return (f"{head}; nothing was changed. Pick another destination name (topics.rename), or take it over "
                "by listing it under topics.adopt (allowed when it is empty or holds only records this migration "
                "copied)")
    if held.foreign is None:
        return f"{head}; topics.adopt lists it but its records could not be checked ({held.unread}); not adopted"
    return (f"{head}; topics.adopt lists it but {held.foreign} of its records were not written by this migration "
            "(no provenance from its source cluster): adopting it would mix them with the copy; not adopted")
