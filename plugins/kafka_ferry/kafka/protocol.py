"""What the stages need of a Kafka cluster, as a ``Protocol``: ``KafkaCluster`` is the one real implementation, the
in-memory fake of the tests (``tests/fakes/cluster.py``) the other; one contract test holds both to the same answers
(``tests/integration/test_fakes_contract.py``).

Why a Protocol and not the class: a stage annotated with it states which calls it makes, and a test can hand it a
fake that answers those calls the way the brokers do (last value per key, log start and end, committed offsets, a
group with live members) instead of replacing module functions with stand-ins that accept any call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from kafka_ferry.core.cluster_model import ClusterInfo, GroupInfo, TopicInfo


class Cluster(Protocol):
    """The calls on one cluster that the stages make (admin, offsets, groups, produce-and-wait, a consumer)."""

    name: str

    @property
    def principal(self) -> str | None: ...

    def describe_cluster(self) -> ClusterInfo: ...

    def list_topic_names(self) -> list[str]: ...

    def list_partitions(self, topics: Iterable[str]) -> set[tuple[str, int]]: ...

    def partitions_of(self, topics: Iterable[str]) -> list[tuple[str, int]]: ...

    def describe_topics(self, names: Iterable[str]) -> dict[str, TopicInfo]: ...

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: Mapping[str, str]) -> bool: ...

    def create_topics(self, topics: Iterable[tuple[str, int, int, Mapping[str, str]]]) -> dict[str, bool]: ...

    def grow_partitions(self, name: str, total: int) -> None: ...

    def set_topic_configs(self, name: str, configs: Mapping[str, str | None]) -> None: ...

    def set_topics_configs(self, configs: Mapping[str, Mapping[str, str | None]]) -> None: ...

    def list_offsets(self, partitions: Iterable[tuple[str, int]], which: str = "latest",
                     timestamp_ms: int | None = None, read_committed: bool = True) -> dict[tuple[str, int], int]: ...

    def list_group_ids(self) -> list[str]: ...

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupInfo]: ...

    def group_offsets(self, group_id: str) -> dict[tuple[str, int], int]: ...

    def groups_offsets(self, group_ids: Iterable[str]) -> dict[str, dict[tuple[str, int], int]]: ...

    def groups_offsets_with_metadata(self, group_ids: Iterable[str]
                                     ) -> dict[str, dict[tuple[str, int], tuple[int, str]]]: ...

    def alter_group_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int],
                            metadata: Mapping[tuple[str, int], str] | None = None) -> None: ...

    def alter_groups_offsets(self, commits: Mapping[str, tuple[Mapping[tuple[str, int], int],
                                                                Mapping[tuple[str, int], str] | None]]
                             ) -> Mapping[str, Exception | None]: ...

    def produce_and_wait(self, topic: str, records: Iterable[tuple[bytes, bytes | None]], *,
                         partition: int | None = None, timeout_s: float = 60.0, what: str = "records") -> int: ...

    def consumer(self, **overrides: Any) -> Any: ...
