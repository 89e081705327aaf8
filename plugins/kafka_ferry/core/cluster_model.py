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


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str
    member_count: int

    @property
    def is_active(self) -> bool:
        return self.member_count > 0 or self.state.upper() in ACTIVE_GROUP_STATES


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str
    broker_count: int
