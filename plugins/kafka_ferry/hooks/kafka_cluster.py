"""A Kafka cluster reached through the apache-kafka provider's `kafka` connection (Extra = librdkafka config).

The provider's admin hook only creates and deletes topics; migration needs offsets, groups and configs,
so this hook adds them on the confluent-kafka AdminClient. Errors come back as `KafkaClusterError` with
the connection id and what to check; the connection's config (which may hold credentials) is never
logged, returned or put into an error message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from functools import cached_property
from typing import Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from kafka_ferry.core.acl_plan import principal_of
from kafka_ferry.core.cluster_model import ClusterInfo, GroupInfo, TopicInfo
from kafka_ferry.io.kafka_errors import KafkaClusterError

TIMEOUT_S = 30.0
# Group coordinator moves and loads (after a broker start or a leader change) pass within seconds.
RETRIABLE_CODES = frozenset({
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
    # a restarted broker answers with a stale leader epoch until its metadata catches up
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH,
})
RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 4.0)
WAIT_SLICE_S = 0.5
SLICE_RETRY_CODES = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT})
# Connection errors no wait can cure: the call fails at once, saying so.
FATAL_CLIENT_CODES = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
                                KafkaError._SSL})

class KafkaClusterHook(KafkaBaseHook):
    """Admin, producer and consumer access to one cluster; one hook per Airflow connection."""

    hook_name = "Kafka cluster (kafka-ferry)"
    request_timeout_s = TIMEOUT_S  # per call; an instance may lower it (tests of unreachable clusters)

    def __init__(self, kafka_config_id: str = KafkaBaseHook.default_conn_name) -> None:
        super().__init__(kafka_config_id=kafka_config_id)

    # --- clients -------------------------------------------------------------------------------
    @cached_property
    def client_config(self) -> dict[str, Any]:
        """The librdkafka config of the connection. Secret: never log or return it from a task."""
        return self._build_config()

    @property
    def bootstrap_servers(self) -> str | None:
        """The addresses errors name (never the rest of the config)."""
        return self.client_config.get("bootstrap.servers")

    @cached_property
    def principal(self) -> str | None:
        """Who the connection authenticates as (named in authorization errors); not a secret."""
        return principal_of(self.client_config)

    @cached_property
    def admin(self) -> AdminClient:
        config = dict(self.client_config)
        config.setdefault("error_cb", self._on_client_error)
        return AdminClient(config)

    _client_error: KafkaError | None = None

    def _on_client_error(self, error: KafkaError) -> None:
        """librdkafka's connection-level errors (authentication, brokers down): they explain a call's timeout,
        and an authentication failure ends the wait at once (waiting longer cannot fix credentials)."""
        self._client_error = error

    def producer(self, **overrides: Any) -> Producer:
        return Producer({**self.client_config, **overrides})

    def consumer(self, **overrides: Any) -> Consumer:
        config = {"group.id": "kafka-ferry-reader", "enable.auto.commit": False, **overrides}
        return Consumer({**self.client_config, **config})

    def _wait(self, future: Future, operation: str, acl: Mapping[str, tuple[str, str]] | None = None) -> Any:
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            try:
                return future.result(timeout=min(WAIT_SLICE_S, max(0.0, deadline - time.monotonic())))
            except KafkaException as exc:
                raise KafkaClusterError.on(self, operation, exc.args[0],
                                           acl=acl) from None
            except TimeoutError:
                self.admin.poll(0)  # serves error_cb
                last = self._client_error
                if last is not None and last.code() in FATAL_CLIENT_CODES:
                    raise KafkaClusterError.on(self, operation, last) from None
                if time.monotonic() >= deadline:
                    detail = f"; last client error: {last.str()}" if last is not None else ""
                    timed_out = KafkaError(KafkaError._TIMED_OUT,
                                           f"no answer within {self.request_timeout_s:g} s{detail}")
                    raise KafkaClusterError.on(self, operation, timed_out) from None

    def _retrying(self, call: Callable[[], Any]) -> Any:
        """Run a call again while it fails with a transient coordinator/leader error."""
        for delay in RETRY_DELAYS_S:
            try:
                return call()
            except KafkaClusterError as exc:
                if exc.code not in RETRIABLE_CODES:
                    raise
                self.log.info("transient Kafka error, retrying in %.1f s: %s", delay, exc)
                time.sleep(delay)
        return call()

    def _wait_all(self, futures: Mapping[Any, Future], operation: str,
                  acl: Callable[[Any], Mapping[str, tuple[str, str]]] | None = None) -> dict[Any, Any]:
        return {key: self._wait(f, f"{operation} {key}", acl(key) if acl else None) for key, f in futures.items()}

    # --- cluster and topics --------------------------------------------------------------------
    def describe_cluster(self) -> ClusterInfo:
        result = self._wait(self.admin.describe_cluster(request_timeout=self.request_timeout_s), "describe cluster")
        return ClusterInfo(cluster_id=result.cluster_id, broker_count=len(result.nodes))

    def list_topic_names(self) -> list[str]:
        # In slices, so an authentication failure (reported through error_cb) ends the wait at once.
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            try:
                metadata = self.admin.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
                return sorted(metadata.topics)
            except KafkaException as exc:
                self.admin.poll(0)
                last = self._client_error
                if last is not None and last.code() in FATAL_CLIENT_CODES:
                    raise KafkaClusterError.on(self, "list topics", last) from None
                if time.monotonic() >= deadline or exc.args[0].code() not in SLICE_RETRY_CODES:
                    raise KafkaClusterError.on(self, "list topics", exc.args[0]) from None

    def describe_topics(self, names: Iterable[str]) -> dict[str, TopicInfo]:
        """Partition count, replication factor and effective configs of each existing topic (missing ones omitted)."""
        names = sorted(set(names))
        existing = set(self.list_topic_names())
        names = [n for n in names if n in existing]
        if not names:
            return {}
        descriptions = self._wait_all(self.admin.describe_topics(TopicCollection(names)), "describe topic",
                                      lambda name: {"TOPIC": ("DESCRIBE", name)})
        resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
        configs = self._wait_all(self.admin.describe_configs(resources), "describe configs of",
                                 lambda res: {"TOPIC": ("DESCRIBE_CONFIGS", res.name)})
        by_name = {res.name: {k: e.value for k, e in entries.items() if e.value is not None}
                   for res, entries in configs.items()}
        return {
            name: TopicInfo(
                name=name,
                partitions=len(d.partitions),
                replication_factor=len(d.partitions[0].replicas) if d.partitions else 0,
                configs=by_name.get(name, {}),
            )
            for name, d in descriptions.items()
        }

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]) -> bool:
        """Create a topic; returns False when it already exists (a retried run)."""
        future = self.admin.create_topics(
            [NewTopic(name, partitions, replication_factor, config=dict(configs))],
            request_timeout=self.request_timeout_s,
        )[name]
        try:
            future.result(timeout=self.request_timeout_s)
            return True
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            raise KafkaClusterError.on(self, f"create topic {name}", exc.args[0],
                                       acl={"TOPIC": ("CREATE", name)}) from None

    def grow_partitions(self, name: str, total: int) -> None:
        self._wait(self.admin.create_partitions([NewPartitions(name, total)])[name], f"grow partitions of {name}",
                   {"TOPIC": ("ALTER", name)})

    def set_topic_configs(self, name: str, configs: Mapping[str, str | None]) -> None:
        """Set topic-level configs; a None value removes the topic's override (the broker default applies)."""
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                               else AlterConfigOpType.DELETE) for k, v in configs.items()]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        self._wait_all(self.admin.incremental_alter_configs([resource]), "alter configs of",
                       lambda res: {"TOPIC": ("ALTER_CONFIGS", res.name)})

    # --- offsets -------------------------------------------------------------------------------
    def list_offsets(self, partitions: Iterable[tuple[str, int]], which: str = "latest",
                     timestamp_ms: int | None = None, read_committed: bool = True) -> dict[tuple[str, int], int]:
        """Earliest, latest (the last stable offset under read_committed) or by-time offsets per partition."""
        spec = {"earliest": OffsetSpec.earliest, "latest": OffsetSpec.latest}.get(which)
        offset_spec = OffsetSpec.for_timestamp(timestamp_ms) if which == "time" else spec()
        request = {TopicPartition(t, p): offset_spec for t, p in partitions}
        if not request:
            return {}
        isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED

        def call():
            futures = self.admin.list_offsets(request, isolation_level=isolation,
                                              request_timeout=self.request_timeout_s)
            return self._wait_all(futures, f"list {which} offsets of", lambda tp: {"TOPIC": ("DESCRIBE", tp.topic)})

        return {(tp.topic, tp.partition): info.offset for tp, info in self._retrying(call).items()}

    def partitions_of(self, topics: Iterable[str]) -> list[tuple[str, int]]:
        return [(t, p) for t, info in sorted(self.describe_topics(topics).items()) for p in range(info.partitions)]

    # --- consumer groups -----------------------------------------------------------------------
    def list_group_ids(self) -> list[str]:
        future = self.admin.list_consumer_groups(request_timeout=self.request_timeout_s)
        result = self._wait(future, "list consumer groups")
        return sorted(g.group_id for g in result.valid)

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupInfo]:
        group_ids = sorted(set(group_ids))
        if not group_ids:
            return {}
        def call():
            futures = self.admin.describe_consumer_groups(group_ids, request_timeout=self.request_timeout_s)
            return self._wait_all(futures, "describe group", lambda gid: {"GROUP": ("DESCRIBE", gid)})

        return {gid: GroupInfo(gid, d.state.name, len(d.members)) for gid, d in self._retrying(call).items()}

    def group_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        """Committed offsets of a group (partitions without a commit are left out)."""
        return {tp: offset for tp, (offset, _) in self.group_offsets_with_metadata(group_id).items()}

    def group_offsets_with_metadata(self, group_id: str) -> dict[tuple[str, int], tuple[int, str]]:
        def call():
            futures = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)],
                                                             request_timeout=self.request_timeout_s)
            return self._wait(futures[group_id], f"read offsets of group {group_id}",
                              {"GROUP": ("DESCRIBE", group_id)})

        result = self._retrying(call)
        return {(tp.topic, tp.partition): (tp.offset, tp.metadata or "")
                for tp in result.topic_partitions if tp.offset >= 0}

    def alter_group_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int],
                            metadata: Mapping[tuple[str, int], str] | None = None) -> None:
        """Commit offsets for a group; the broker refuses this while the group has members."""
        metadata = metadata or {}
        tps = []
        for (t, p), o in sorted(offsets.items()):
            tp = TopicPartition(t, p, o)
            if metadata.get((t, p)):
                tp = TopicPartition(t, p, o, metadata=metadata[(t, p)])
            tps.append(tp)
        operation = f"commit offsets of group {group_id}"

        def call():
            futures = self.admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id, tps)],
                                                              request_timeout=self.request_timeout_s)
            needs = {"GROUP": ("READ", group_id)}
            result = self._wait(futures[group_id], operation, needs)
            failed = [tp for tp in result.topic_partitions if tp.error is not None]
            if failed:
                raise KafkaClusterError.on(self, operation, failed[0].error,
                                           acl={**needs, "TOPIC": ("DESCRIBE", failed[0].topic)})

        self._retrying(call)
