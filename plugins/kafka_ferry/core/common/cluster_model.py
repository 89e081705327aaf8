"""Plain descriptions of what a cluster holds, so planning code can be pure and tested without a broker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# States in which a consumer group has live members (Kafka's ConsumerGroupState names).
ACTIVE_GROUP_STATES = frozenset({"STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE", "ASSIGNING", "RECONCILING"})


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)


# What the client library says of a group of a type it cannot describe (a KIP-1071 streams group on Kafka 4.2+:
# librdkafka neither lists it nor describes it; its describe answers "Dead, no members" while the application runs).
# Such a group has committed offsets, which a Dead group never has: kafka-ferry reports it as UNDESCRIBED and counts
# it as having members, so no check ever takes it for empty (kafka.cluster.describe_groups).
UNDESCRIBED_STATE = "UNDESCRIBED"
UNDESCRIBED_WHY = ("committed offsets, yet described as Dead with no member: a group of a type this client cannot "
                   "describe (a KIP-1071 streams group?), counted as live")


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str
    member_count: int

    @property
    def described(self) -> bool:
        """False for a group the client could not describe (``UNDESCRIBED_STATE``): its members are unknown."""
        return self.state != UNDESCRIBED_STATE

    @property
    def is_active(self) -> bool:
        """Live members, or unknown ones: an undescribed group is never taken for empty."""
        return not self.described or self.member_count > 0 or self.state.upper() in ACTIVE_GROUP_STATES

    def describe(self) -> str:
        if not self.described:
            return f"state {UNDESCRIBED_STATE} ({UNDESCRIBED_WHY})"
        return f"{self.member_count} member(s), state {self.state}"


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str
    broker_count: int
