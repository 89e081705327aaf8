"""What provisioning would change on the destination, computed before anything is changed.

Everything is decided up front so that a refusal (a destination topic with more partitions than its
source, an incompatible cleanup.policy, an active destination group) stops the run before the first
topic is created: nothing is ever half-applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_ferry.core.common.cluster_model import GroupInfo, TopicInfo
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.provisioning.time_fidelity import TopicTimePlan, plan_topic_time

if TYPE_CHECKING:  # annotations only: the copy's Spark workers import this module, not the spec's models
    from kafka_ferry.core.specs.spec import MigrationSpec

# Topic configs whose meaning must survive the move. Others (segment sizes, indexes) are cluster tuning.
MIRRORED_CONFIGS = (
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "max.message.bytes",
    "compression.type",
    "message.timestamp.type",
    "min.insync.replicas",
)


class ProvisioningRefused(Permanent, RuntimeError):
    """Raised with every refusal at once, before any change is made."""

    def __init__(self, refusals: list[str]):
        self.refusals = refusals
        super().__init__("provisioning refused, nothing was changed:\n  - " + "\n  - ".join(refusals))


@dataclass(frozen=True)
class TopicAction:
    source_topic: str
    destination_topic: str
    action: str  # "create" | "grow" | "alter" | "grow+alter" | "none"
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    config_changes: Mapping[str, tuple[str | None, str]] = field(default_factory=dict)
    current_partitions: int | None = None
    time: TopicTimePlan | None = None  # timestamp type and limits while copying and from promotion on

    def describe(self) -> str:
        if self.action == "create":
            return (f"create {self.destination_topic} (from {self.source_topic}): {self.partitions} partitions, "
                    f"RF {self.replication_factor}, {dict(self.configs)}")
        if self.action == "none":
            return f"unchanged {self.destination_topic}"
        parts = []
        if "grow" in self.action:
            parts.append(f"partitions {self.current_partitions} -> {self.partitions}")
        for name, (old, new) in sorted(self.config_changes.items()):
            parts.append(f"{name}: {old!r} -> {new!r}")
        return f"{self.action} {self.destination_topic}: " + ", ".join(parts)


@dataclass(frozen=True)
class TopicPlan:
    actions: tuple[TopicAction, ...]
    refusals: tuple[str, ...] = ()
    # core.provisioning.topic_ownership's decisions (OwnershipPlan.as_dict), once the stage checked who owns each mirror
    ownership: Mapping[str, Any] = field(default_factory=dict)

    @property
    def changes(self) -> tuple[TopicAction, ...]:
        return tuple(a for a in self.actions if a.action != "none")

    def raise_if_refused(self) -> None:
        if self.refusals:
            raise ProvisioningRefused(list(self.refusals))

    def timestamp_lines(self) -> list[str]:
        return [line for a in self.actions if a.time for line in a.time.describe()]

    def as_dict(self) -> dict[str, Any]:
        return {
            "changes": [a.describe() for a in self.changes],
            "unchanged": [a.destination_topic for a in self.actions if a.action == "none"],
            "refusals": list(self.refusals),
            **({"ownership": dict(self.ownership)} if self.ownership else {}),
        }


def select_topics(spec: MigrationSpec, source_topics: list[str]) -> list[str]:
    """Source topics the spec selects, sorted; Kafka-internal topics ('__…') are never migrated."""
    return sorted(t for t in source_topics if not t.startswith("__") and spec.selects_topic(t))


def desired_configs(source: TopicInfo, replication_factor: int) -> dict[str, str]:
    configs = {k: source.configs[k] for k in MIRRORED_CONFIGS if k in source.configs}
    if "min.insync.replicas" in configs:
        configs["min.insync.replicas"] = str(min(int(configs["min.insync.replicas"]), replication_factor))
    return configs


def _cleanup_policies(value: str | None) -> frozenset[str]:
    return frozenset(p.strip() for p in (value or "delete").split(",") if p.strip())


def plan_topic(spec: MigrationSpec, source: TopicInfo, destination: TopicInfo | None,
               destination_brokers: int, recorded_time: TopicTimePlan | None = None) -> tuple[TopicAction, list[str]]:
    dest_name = spec.topics.rename.destination_topic(source.name)
    rf = max(1, min(source.replication_factor, destination_brokers))
    time = plan_topic_time(source.name, dest_name, source.configs, destination.configs if destination else None,
                           recorded_time)
    configs = {**desired_configs(source, rf), **time.during}  # the source's timestamp type comes at promotion
    if destination is None:
        return TopicAction(source.name, dest_name, "create", source.partitions, rf, configs, time=time), []
    refusals = []
    if destination.partitions > source.partitions:
        refusals.append(f"{dest_name}: destination has {destination.partitions} partitions, source {source.name} "
                        f"has {source.partitions}; partition-preserving copy is impossible (shrink is not possible "
                        f"in Kafka: delete or rename the destination topic)")
    src_policy = _cleanup_policies(source.configs.get("cleanup.policy"))
    dst_policy = _cleanup_policies(destination.configs.get("cleanup.policy"))
    if src_policy != dst_policy:
        refusals.append(f"{dest_name}: cleanup.policy is {','.join(sorted(dst_policy))} on the destination but "
                        f"{','.join(sorted(src_policy))} on the source; copying into it would lose or keep the "
                        f"wrong records")
    changes = {k: (destination.configs.get(k), v) for k, v in configs.items()
               if k != "cleanup.policy" and destination.configs.get(k) != v}
    grow = destination.partitions < source.partitions
    action = "+".join(x for x, on in (("grow", grow), ("alter", bool(changes))) if on) or "none"
    return TopicAction(source.name, dest_name, action, source.partitions, rf, configs, changes,
                       destination.partitions, time), refusals


def plan_topics(spec: MigrationSpec, source_topics: Mapping[str, TopicInfo],
                destination_topics: Mapping[str, TopicInfo], destination_brokers: int,
                recorded_time: Mapping[str, TopicTimePlan] | None = None) -> TopicPlan:
    """``recorded_time``: the timestamp plans an earlier provisioning recorded, by source topic."""
    actions, refusals = [], []
    seen: dict[str, str] = {}
    for name in sorted(source_topics):
        action, refused = plan_topic(spec, source_topics[name],
                                     destination_topics.get(spec.topics.rename.destination_topic(name)),
                                     destination_brokers, (recorded_time or {}).get(name))
        if action.destination_topic in seen:
            refused.append(f"{action.destination_topic}: both {seen[action.destination_topic]} and {name} map to it")
        seen[action.destination_topic] = name
        actions.append(action)
        refusals.extend(refused)
    return TopicPlan(tuple(actions), tuple(refusals))


@dataclass(frozen=True)
class GroupPlan:
    migrated: Mapping[str, tuple[str, ...]]  # group -> source topics it has committed offsets on
    skipped: Mapping[str, str]  # group -> reason
    refusals: tuple[str, ...] = ()
    promoted: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # left alone: its consumers own it

    def raise_if_refused(self) -> None:
        if self.refusals:
            raise ProvisioningRefused(list(self.refusals))

    def as_dict(self) -> dict[str, Any]:
        return {"migrated": {g: list(t) for g, t in self.migrated.items()}, "skipped": dict(self.skipped),
                "refusals": list(self.refusals), "promoted": {g: list(t) for g, t in self.promoted.items()}}


def plan_groups(spec: MigrationSpec, source_group_topics: Mapping[str, set[str]], migrated_topics: set[str],
                destination_groups: Mapping[str, GroupInfo], promoted_groups: Iterable[str] = ()) -> GroupPlan:
    """Groups the spec selects that have committed offsets on migrated topics; refuse active destination groups.

    ``promoted_groups`` (staged cutover, ``core.cutover.staged_cutover``) are left alone: listed, neither recorded again
    nor checked for destination members. The caller reads them *after* describing ``destination_groups``.
    """
    promoted_now = set(promoted_groups)
    migrated, skipped, refusals, promoted = {}, {}, [], {}
    for group in sorted(source_group_topics):
        if not spec.selects_group(group):
            skipped[group] = "not selected by groups.include/exclude"
            continue
        topics = tuple(sorted(source_group_topics[group] & migrated_topics))
        if group in promoted_now:
            # Why no member check: the check keeps a migration from committing offsets under live consumers, and a
            # promoted group's offsets are never committed by the tool again (invariant A of
            # core.cutover.staged_cutover); its consumers on the destination are the point of promoting it. Refusing
            # them stalls every later catch-up run, and with it the very consumers that moved first.
            promoted[group] = topics
            continue
        if not topics:
            skipped[group] = "no committed offsets on migrated topics"
            continue
        dest = destination_groups.get(group)
        if dest is not None and dest.is_active:
            live = (f"has {dest.member_count} active member(s) on the destination (state {dest.state})"
                    if dest.described else f"is {dest.describe()} on the destination")
            refusals.append(f"group {group}: {live}; stop those consumers before migrating its offsets")
            continue
        migrated[group] = topics
    return GroupPlan(migrated, skipped, tuple(refusals), promoted)
