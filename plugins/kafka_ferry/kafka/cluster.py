"""One Kafka cluster, reached with confluent-kafka: admin, offsets, groups, producers, consumers, produce-and-wait.

The one client of kafka-ferry. The Airflow side gets it from a connection (``KafkaClusterHook.get_conn``);
the Spark job builds the same class from the config the task shipped to it (``kafka.configs``). Nothing
here imports Airflow. Errors come back as ``KafkaClusterError`` naming the cluster (its connection id or
role), the bootstrap addresses and what to check; the config, which may hold credentials, is never
logged, returned in a message or shown by ``repr``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from functools import cached_property
from typing import Any, Protocol, TypedDict

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

from kafka_ferry.core.acls.acl_plan import principal_of
from kafka_ferry.core.common.cluster_model import UNDESCRIBED_STATE, ClusterInfo, GroupInfo, TopicInfo
from kafka_ferry.core.offsets.offset_fetch_wire import CommittedOffset
from kafka_ferry.kafka import call_count, offset_fetch, streams_groups
from kafka_ferry.kafka.bootstrap import PROBE_TIMEOUT_S, listener_speaks, parse_addresses, unreachable
from kafka_ferry.kafka.client_log import librdkafka_logger
from kafka_ferry.kafka.errors import ClusterUnreachableError, KafkaClusterError, ListenerProtocolError
from kafka_ferry.kafka.waiting import RETRIABLE_CODES, RETRY_DELAYS_S, AdminWaits

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0
SETTLE_S = 2.0
# Every internal write (state, syncs, checkpoints, heartbeats) waits for all in-sync replicas.
DURABLE_PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}
# Group offset reads in flight at once: the client takes one group per OffsetFetch request, so many groups are
# many requests; sent together they cost about one round trip per coordinator, not one per group.
GROUPS_IN_FLIGHT = 200
# After the batched offset read failed (connection, TLS, authentication, protocol), the client's path serves this long.
BATCHED_HOLD_OFF_S = 300.0
# How long the Java helper's listing of streams groups is reused (kafka.streams_groups: one JVM per call).
STREAMS_LISTING_KEPT_S = 30.0


def _commit_metadata(group: str, tp: TopicPartition) -> str:
    """A committed offset's metadata as text; "" when it is not UTF-8. Why: Kafka Streams commits binary metadata
    (its partition time), and confluent-kafka decodes the field as UTF-8 on access, raising for those bytes; the
    client has no call for the raw bytes, so such metadata cannot be read or committed again through it. The offset
    is what translation and rollback need; the metadata is dropped, said once per partition at info."""
    try:
        return tp.metadata or ""
    except UnicodeDecodeError:
        return _metadata_not_carried(group, tp.topic, tp.partition)


def _wire_metadata(group: str, committed: CommittedOffset) -> str:
    """``_commit_metadata`` for the batched read's raw bytes, to the character: the text up to the first NUL byte,
    "" (and the same info line) for metadata that is not UTF-8, "" for none. Why up to a NUL: confluent-kafka reads
    the field as a C string, and librdkafka's own commits carry a trailing NUL (the broker holds "keep-me\\0" for
    "keep-me"), so the client's path answers the text before it; so must this one."""
    try:
        return (committed.metadata or b"").split(b"\0", 1)[0].decode("utf-8")
    except UnicodeDecodeError:
        return _metadata_not_carried(group, committed.topic, committed.partition)


def _metadata_not_carried(group: str, topic: str, partition: int) -> str:
    log.info("group %s %s-%d: committed metadata is not UTF-8 (binary, as Kafka Streams writes it): not carried",
             group, topic, partition)
    return ""


class KafkaCluster(AdminWaits):
    """One cluster: ``name`` is what errors call it (the Airflow connection id, or the role in the Spark job).

    ``reuse_producers`` keeps one producer per override set. Why it matters: librdkafka asks for an idempotent
    producer's id on a fixed timer after creating it (it assumes no broker is up that early), so every
    fresh producer's first write waits for that timer, whatever the cluster; a caller writing state more than once
    (per partition, or report then heartbeat) would pay it each time. ``start_durable_producer`` starts that
    timer early, while other work runs. A write that fails drops its producer: the next write gets a new one.
    """

    def __init__(self, name: str, config: Mapping[str, Any], *, reuse_producers: bool = False,
                 request_timeout_s: float = TIMEOUT_S) -> None:
        self.name = name
        self._config = dict(config)
        self.request_timeout_s = request_timeout_s  # per call; tests of unreachable clusters lower it
        self._producers: dict[tuple, Producer] | None = {} if reuse_producers else None
        self._client_error: KafkaError | None = None
        self._streams_listing: tuple[float, tuple[str, ...]] | None = None  # (when, groups): _streams_listed
        # The batched offset read: None = usable; else why not (said once), and until when (None: for good).
        self._batched_off: tuple[str, float | None] | None = None

    def __repr__(self) -> str:
        return f"KafkaCluster({self.name!r}, bootstrap.servers={self.bootstrap_servers!r})"

    # --- clients -------------------------------------------------------------------------------
    @property
    def client_config(self) -> dict[str, Any]:
        """The librdkafka config. Secret: only for handing to the copy job through its secret channel."""
        return dict(self._config)

    @property
    def bootstrap_servers(self) -> str | None:
        """The addresses errors name (never the rest of the config)."""
        return self._config.get("bootstrap.servers")

    @cached_property
    def principal(self) -> str | None:
        """Who the config authenticates as (named in authorization errors); not a secret."""
        return principal_of(self._config)

    @cached_property
    def admin(self) -> AdminClient:
        """The admin client, its requests counted (``kafka.call_count``)."""
        # error_cb is a librdkafka setting confluent-kafka takes in the config; its stubs type values str/int/float
        client = call_count.Counted(AdminClient({"error_cb": self._on_client_error,  # type: ignore[dict-item]
                                                 **self._client_settings()}),
                                    "admin", skip=call_count.ADMIN_LOCAL)
        _settle(client, min(SETTLE_S, self.request_timeout_s))
        return client  # type: ignore[return-value]

    def producer(self, **overrides: Any) -> Producer:
        if self._producers is None:
            return Producer({**self._client_settings(), **overrides})
        key = tuple(sorted((k, repr(v)) for k, v in overrides.items()))
        if key not in self._producers:
            self._producers[key] = Producer({**self._client_settings(), **overrides})
        return self._producers[key]

    def start_durable_producer(self) -> None:
        """Create now the producer the next ``produce_and_wait`` uses (``reuse_producers`` only), so its
        producer id is there by the time the first record is written."""
        if self._producers is None:
            raise ValueError(f"{self!r}: start_durable_producer needs reuse_producers=True")
        self.producer(**DURABLE_PRODUCER)

    def _drop_producer(self, producer: Producer) -> None:
        """Forget a kept producer after a failed write (it may be fenced or fatally failed)."""
        if self._producers is not None:
            self._producers = {k: p for k, p in self._producers.items() if p is not producer}

    def consumer(self, **overrides: Any) -> Consumer:
        config = {"group.id": "kafka-ferry-reader", "enable.auto.commit": False, **overrides}
        call_count.record("consumer.create")
        return call_count.Counted(Consumer({**self._client_settings(), **config}), "consumer",  # type: ignore[return-value]
                                  skip=call_count.FETCH_LOOP)

    def _client_settings(self) -> dict[str, Any]:
        """The config plus librdkafka's log through Python logging, repeats dropped (kafka.client_log); a
        connection's own ``logger`` wins."""
        return {"logger": librdkafka_logger(), **self._config}

    def check_reachable(self, timeout_s: float = PROBE_TIMEOUT_S) -> None:
        """Raise ``ClusterUnreachableError`` (deterministic) when no bootstrap address accepts a TCP connection.

        The pre-flight's first look at a cluster: a wrong host or port fails the task once, in seconds, instead
        of each client call waiting out its timeout on every try."""
        reasons = unreachable(self.bootstrap_servers, timeout_s)
        if reasons:
            raise ClusterUnreachableError(self.name, reasons)
        if str(self._config.get("security.protocol", "PLAINTEXT")).upper() == "PLAINTEXT":
            # A TLS or SASL listener behind a PLAINTEXT config: named now, not after the client's 30 s timeouts
            for host, port in parse_addresses(self.bootstrap_servers)[:1]:
                speaks = listener_speaks((host, port), timeout_s)
                if speaks:
                    raise ListenerProtocolError(self.name, f"{host}:{port}", speaks)

    # --- cluster and topics --------------------------------------------------------------------
    def describe_cluster(self) -> ClusterInfo:
        result = self._wait(self.admin.describe_cluster(request_timeout=self.request_timeout_s), "describe cluster")
        return ClusterInfo(cluster_id=result.cluster_id, broker_count=len(result.nodes))

    def list_topic_names(self) -> list[str]:
        return sorted(self._metadata("list topics").topics)

    def list_partitions(self, topics: Iterable[str]) -> set[tuple[str, int]]:
        """The existing (topic, partition) pairs of these topics, from metadata alone (DESCRIBE on the topics is
        enough; a missing topic has none)."""
        wanted = set(topics)
        listed = self._metadata("list partitions").topics
        return {(t, p) for t in wanted if t in listed and listed[t].error is None for p in listed[t].partitions}

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
            name: TopicInfo(name=name, partitions=len(d.partitions),
                            replication_factor=len(d.partitions[0].replicas) if d.partitions else 0,
                            configs=by_name.get(name, {}))
            for name, d in descriptions.items()
        }

    def partitions_of(self, topics: Iterable[str]) -> list[tuple[str, int]]:
        """The existing (topic, partition) pairs of these topics, sorted (a missing topic has none).

        From one metadata request: the sensors ask this on every poke, and the configs ``describe_topics`` also
        fetches (a DescribeTopics plus a DescribeConfigs) say nothing about partitions."""
        return sorted(self.list_partitions(topics))

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]) -> bool:
        """Create a topic; returns False when it already exists (a retried run)."""
        future = self.admin.create_topics([NewTopic(name, partitions, replication_factor, config=dict(configs))],
                                          request_timeout=self.request_timeout_s)[name]
        try:
            future.result(timeout=self.request_timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            raise KafkaClusterError.on(self, f"create topic {name}", exc.args[0],
                                       acl={"TOPIC": ("CREATE", name)}) from None
        self._await_leaders(name, partitions)
        return True

    def create_topics(self, topics: Iterable[tuple[str, int, int, Mapping[str, str]]]) -> dict[str, bool]:
        """``create_topic`` for many (name, partitions, replication factor, configs) in one CreateTopics request;
        per name True (created) or False (it existed already: a retried run). Any other refusal raises, naming
        its topic, after every answer is in (the others are created; running again creates none twice).

        Why: provisioning a fleet created one topic per request and then waited for that topic's leaders (two
        requests or more per topic); here one request, and one wait over the cluster's metadata for them all."""
        new = [NewTopic(name, partitions, rf, config=dict(configs)) for name, partitions, rf, configs in topics]
        if not new:
            return {}
        futures = self.admin.create_topics(new, request_timeout=self.request_timeout_s)
        created, failure = {}, None
        for topic in new:
            try:
                futures[topic.topic].result(timeout=self.request_timeout_s)
                created[topic.topic] = True
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    created[topic.topic] = False
                elif failure is None:
                    failure = KafkaClusterError.on(self, f"create topic {topic.topic}", exc.args[0],
                                                   acl={"TOPIC": ("CREATE", topic.topic)})
        self._await_all_leaders({t.topic: t.num_partitions for t in new if created.get(t.topic)})
        if failure is not None:
            raise failure
        return created

    def _await_all_leaders(self, partitions: Mapping[str, int]) -> None:
        """``_await_leaders`` for many topics at once, from the cluster's metadata (one request per look)."""
        deadline = time.monotonic() + self.request_timeout_s
        waiting = dict(partitions)
        while waiting and time.monotonic() < deadline:
            try:
                listed = self.admin.list_topics(timeout=max(0.1, min(5.0, deadline - time.monotonic()))).topics
            except KafkaException:
                listed = {}
            waiting = {name: count for name, count in waiting.items()
                       if not (name in listed and listed[name].error is None and len(listed[name].partitions) == count
                               and all(p.leader >= 0 for p in listed[name].partitions.values()))}
            if waiting:
                time.sleep(0.05)

    def _await_leaders(self, name: str, partitions: int) -> None:
        """Wait (bounded by the request timeout) until this client's metadata shows a leader for every partition
        of a topic just created.

        Why: CreateTopics returns once the controller committed the topic; the brokers, and this client's
        metadata cache, learn its leaders a moment later. A request made at once (the state store reads the state
        topic right after creating it) fails with "No leaders found", which no retry policy treats as transient.
        Asking for the topic's metadata refreshes the cache. A topic still leaderless at the deadline is left to
        the request that needs it (and its own error)."""
        deadline = time.monotonic() + self.request_timeout_s
        while time.monotonic() < deadline:
            try:
                topic = self.admin.list_topics(name, timeout=max(0.1, min(1.0, deadline - time.monotonic()))
                                               ).topics.get(name)
            except KafkaException:
                topic = None
            if (topic is not None and topic.error is None and len(topic.partitions) == partitions
                    and all(p.leader >= 0 for p in topic.partitions.values())):
                return
            time.sleep(0.05)

    def grow_partitions(self, name: str, total: int) -> None:
        self._wait(self.admin.create_partitions([NewPartitions(name, total)])[name], f"grow partitions of {name}",
                   {"TOPIC": ("ALTER", name)})

    def set_topic_configs(self, name: str, configs: Mapping[str, str | None]) -> None:
        """Set topic-level configs; a None value removes the topic's override (the broker default applies)."""
        self.set_topics_configs({name: configs})

    def set_topics_configs(self, configs: Mapping[str, Mapping[str, str | None]]) -> None:
        """``set_topic_configs`` for many topics in one IncrementalAlterConfigs request (a promotion switches
        every mirror's timestamp configs: one request, not one per topic)."""
        resources = [ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                        else AlterConfigOpType.DELETE) for k, v in topic_configs.items()])
            for name, topic_configs in configs.items() if topic_configs]
        if resources:
            self._wait_all(self.admin.incremental_alter_configs(resources), "alter configs of",
                           lambda res: {"TOPIC": ("ALTER_CONFIGS", res.name)})

    # --- offsets -------------------------------------------------------------------------------
    def list_offsets(self, partitions: Iterable[tuple[str, int]], which: str = "latest",
                     timestamp_ms: int | None = None, read_committed: bool = True) -> dict[tuple[str, int], int]:
        """Earliest, latest (the last stable offset under read_committed) or by-time offsets per partition."""
        if which == "time" and timestamp_ms is not None:
            offset_spec = OffsetSpec.for_timestamp(timestamp_ms)
        elif which in ("earliest", "latest"):
            offset_spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
        else:
            raise ValueError(f"list_offsets: which={which!r} (with timestamp_ms={timestamp_ms!r}) is not 'earliest', "
                             "'latest' or 'time' with a timestamp")
        request = {TopicPartition(t, p): offset_spec for t, p in partitions}
        if not request:
            return {}
        isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED

        def call():
            futures = self.admin.list_offsets(request, isolation_level=isolation,
                                              request_timeout=self.request_timeout_s)
            return self._wait_all(futures, f"list {which} offsets of", lambda tp: {"TOPIC": ("DESCRIBE", tp.topic)})

        return {(tp.topic, tp.partition): info.offset for tp, info in self._retrying(call).items()}

    # --- consumer groups -----------------------------------------------------------------------
    def list_group_ids(self) -> list[str]:
        """Every group: librdkafka's listing (consumer and classic groups) and, when the Java helper is configured
        (``kafka.streams_groups``), the KIP-1071 streams groups librdkafka does not list."""
        future = self.admin.list_consumer_groups(request_timeout=self.request_timeout_s)
        ids = {g.group_id for g in self._wait(future, "list consumer groups").valid}
        return sorted(ids | set(self._streams_listed()))

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupInfo]:
        group_ids = sorted(set(group_ids))
        if not group_ids:
            return {}

        def call():
            futures = self.admin.describe_consumer_groups(group_ids, request_timeout=self.request_timeout_s)
            return self._wait_all(futures, "describe group", lambda gid: {"GROUP": ("DESCRIBE", gid)})

        infos = {gid: GroupInfo(gid, d.state.name, len(d.members)) for gid, d in self._retrying(call).items()}
        # Only this call is wrapped: librdkafka describes a KIP-1071 streams group (Kafka 4.2+) as Dead with no
        # member even while its application runs, but reads its committed offsets right. A Dead group has no
        # committed offsets, so a Dead one that has them is a group this client cannot see. Kafka's Java Admin
        # describes it when configured (kafka.streams_groups); else, or when that fails, it is UNDESCRIBED, counted
        # as live by every check (core.common.cluster_model.GroupInfo.is_active), never taken for empty. A streams group
        # whose application runs but has not committed yet has no offsets: the helper's listing names it.
        dead = [gid for gid, info in infos.items() if info.state.upper() == "DEAD"]
        listed = set(self._streams_listed()) if dead else set()
        hidden = sorted(gid for gid, offsets in (self.groups_offsets(dead) if dead else {}).items()
                        if offsets or gid in listed)
        answer = self._streams_groups(hidden) if hidden and streams_groups.configured() else None
        for gid in hidden:
            seen = answer.described.get(gid) if answer else None
            infos[gid] = GroupInfo(gid, seen.state, seen.members) if seen else GroupInfo(gid, UNDESCRIBED_STATE, 0)
        return infos

    def streams_group_topology(self, group_ids: Iterable[str]) -> dict[str, streams_groups.StreamsGroup]:
        """The streams groups among ``group_ids`` as Kafka's Java Admin describes them (their topology names the
        application's input and internal topics); {} when the helper is not configured or fails (said at warning)."""
        group_ids = sorted(set(group_ids))
        answer = self._streams_groups(group_ids) if group_ids and streams_groups.configured() else None
        return dict(answer.described) if answer else {}

    def _streams_listed(self) -> tuple[str, ...]:
        """The streams groups the Java helper lists, kept ``STREAMS_LISTING_KEPT_S``: a task lists groups several
        times within seconds (pre-flight, applications, provisioning), and each Java call starts a JVM."""
        if not streams_groups.configured():
            return ()
        kept = self._streams_listing
        if kept is None or time.monotonic() - kept[0] > STREAMS_LISTING_KEPT_S:
            answer = self._streams_groups([])
            if answer is None:
                return ()
            kept = self._streams_listing = (time.monotonic(), answer.listed)
        return kept[1]

    def _streams_groups(self, group_ids: list[str]) -> streams_groups.StreamsGroupsAnswer | None:
        """The Java helper's answer, or None when it could not be had (said at warning: the groups stay unseen)."""
        try:
            answer = streams_groups.streams_groups(self._config, group_ids)
            self._streams_listing = (time.monotonic(), answer.listed)
        except (streams_groups.StreamsGroupsUnavailable, OSError) as exc:
            log.warning("%s: KIP-1071 streams groups not listed or described through Kafka's Java Admin (%s): "
                        "such groups stay undescribed, counted live; %s", self.name, exc, streams_groups.WAY_OUT)
            return None
        for gid, why in answer.missing.items():
            log.info("%s: group %s is not described as a streams group (%s)", self.name, gid, why)
        return answer

    def group_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        """Committed offsets of a group (partitions without a commit are left out)."""
        return {tp: offset for tp, (offset, _) in self.group_offsets_with_metadata(group_id).items()}

    def group_offsets_with_metadata(self, group_id: str) -> dict[tuple[str, int], tuple[int, str]]:
        return self.groups_offsets_with_metadata([group_id])[group_id]

    def groups_offsets(self, group_ids: Iterable[str]) -> dict[str, dict[tuple[str, int], int]]:
        """Committed offsets of each group (partitions without a commit left out), read together."""
        return {g: {tp: offset for tp, (offset, _) in offsets.items()}
                for g, offsets in self.groups_offsets_with_metadata(group_ids).items()}

    def groups_offsets_with_metadata(self, group_ids: Iterable[str]
                                     ) -> dict[str, dict[tuple[str, int], tuple[int, str]]]:
        """Committed (offset, metadata) of each group: one OffsetFetch per coordinator for all of them where the
        cluster allows (``kafka.offset_fetch``), else through the client, every group's request in flight at once.

        Why: a promotion, a translation and a sensor's poke read every migrated group; the client takes one group per
        request (200 groups, 200 requests). The batched answer is used only where it is clean: a group whose
        coordinator was not found, or whose answer carries a group or partition error, is read again through the
        client, which raises or retries exactly as it always did; a batched call that fails as a whole (connection,
        TLS, authentication, protocol) leaves every group to the client."""
        group_ids = sorted(set(group_ids))
        out: dict[str, dict[tuple[str, int], tuple[int, str]]] = {}
        rest = group_ids
        if group_ids and self._batched_offsets_usable():
            try:
                answer = offset_fetch.read_groups_offsets(self._config, group_ids, self.request_timeout_s)
            except offset_fetch.BatchedUnavailable as exc:
                self._batched_off = (str(exc), None)
                log.info("%s: group offsets are read one group per request (%s)", self.name, exc)
            except offset_fetch.BatchedFailed as exc:
                self._batched_off = (str(exc), time.monotonic() + BATCHED_HOLD_OFF_S)
                log.info("%s: the batched group offset read failed, reading one group per request for %.0f s (%s)",
                         self.name, BATCHED_HOLD_OFF_S, exc)
            else:
                for group, committed in answer.offsets.items():
                    out[group] = {(c.topic, c.partition): (c.offset, _wire_metadata(group, c))
                                  for c in committed if c.offset >= 0}
                rest = sorted(answer.unresolved)
        if rest:
            out.update(self._groups_offsets_one_per_request(rest))
        return {g: out[g] for g in group_ids}

    def _batched_offsets_usable(self) -> bool:
        """Whether to try the batched read now; the first time it is not, why (at info, no secret) once."""
        if self._batched_off is None:
            reason = offset_fetch.unsupported(self._config)
            if reason is None:
                return True
            self._batched_off = (reason, None)
            log.info("%s: group offsets are read one group per request (%s)", self.name, reason)
            return False
        _, until = self._batched_off
        if until is not None and time.monotonic() >= until:
            self._batched_off = None
            return self._batched_offsets_usable()
        return False

    def _groups_offsets_one_per_request(self, group_ids: list[str]
                                        ) -> dict[str, dict[tuple[str, int], tuple[int, str]]]:
        """Through the client: one OffsetFetch per group, every group's request in flight at once
        (``GROUPS_IN_FLIGHT`` at a time), then awaited."""
        out: dict[str, dict[tuple[str, int], tuple[int, str]]] = {}
        for i in range(0, len(group_ids), GROUPS_IN_FLIGHT):
            chunk = group_ids[i:i + GROUPS_IN_FLIGHT]

            def call(chunk=chunk):
                futures = {g: self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)],
                                                                     request_timeout=self.request_timeout_s)[g]
                           for g in chunk}
                return self._wait_all(futures, "read offsets of group", lambda g: {"GROUP": ("DESCRIBE", g)})

            for group, result in self._retrying(call).items():
                out[group] = {(tp.topic, tp.partition): (tp.offset, _commit_metadata(group, tp))
                              for tp in result.topic_partitions if tp.offset >= 0}
        return out

    def alter_group_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int],
                            metadata: Mapping[tuple[str, int], str] | None = None) -> None:
        """Commit offsets for a group; the broker refuses this while the group has members."""
        tps = _offset_partitions(offsets, metadata or {})
        operation = f"commit offsets of group {group_id}"
        needs = {"GROUP": ("READ", group_id)}

        def call():
            futures = self.admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id, tps)],
                                                              request_timeout=self.request_timeout_s)
            failed = [tp for tp in self._wait(futures[group_id], operation, needs).topic_partitions
                      if tp.error is not None]
            if failed:
                raise KafkaClusterError.on(self, operation, failed[0].error,
                                           acl={**needs, "TOPIC": ("DESCRIBE", failed[0].topic)})

        self._retrying(call)

    def alter_groups_offsets(self, commits: Mapping[str, tuple[Mapping[tuple[str, int], int],
                                                                Mapping[tuple[str, int], str] | None]]
                             ) -> dict[str, KafkaClusterError | None]:
        """``alter_group_offsets`` for many groups, every group's request in flight at once; per group None
        (committed) or the error that refused it. Transient coordinator errors are retried for those groups only.

        Why: a promotion commits every migrated group; one request after another costs a round trip per group.
        The client takes one group per request, so they go out together and are then awaited."""
        pending = dict(commits)
        outcome: dict[str, KafkaClusterError | None] = {}
        for delay in (*RETRY_DELAYS_S, None):
            futures = {}
            for group, (offsets, metadata) in pending.items():
                tps = _offset_partitions(offsets, metadata or {})
                futures[group] = self.admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group, tps)], request_timeout=self.request_timeout_s)[group]
            retry = {}
            for group, future in futures.items():
                operation, needs = f"commit offsets of group {group}", {"GROUP": ("READ", group)}
                try:
                    failed = [tp for tp in self._wait(future, operation, needs).topic_partitions
                              if tp.error is not None]
                    if failed:
                        raise KafkaClusterError.on(self, operation, failed[0].error,
                                                   acl={**needs, "TOPIC": ("DESCRIBE", failed[0].topic)})
                    outcome[group] = None
                except KafkaClusterError as exc:
                    if delay is not None and exc.code in RETRIABLE_CODES:
                        retry[group] = pending[group]
                    else:
                        outcome[group] = exc
            if not retry or delay is None:  # nothing is retried after the last delay
                break
            log.info("transient Kafka error committing %d group(s), retrying in %.1f s", len(retry), delay)
            time.sleep(delay)
            pending = retry
        return outcome

    # --- writes --------------------------------------------------------------------------------
    def produce_and_wait(self, topic: str, records: Iterable[tuple[bytes, bytes | None]], *,
                         partition: int | None = None, timeout_s: float = 60.0, what: str = "records") -> int:
        """Idempotent, acks=all produce of (key, value) pairs; returns how many once every one is acknowledged
        by all in-sync replicas, and raises on any failed delivery or on records still unsent at the timeout."""
        records = list(records)
        if not records:
            return 0
        producer = self.producer(**DURABLE_PRODUCER)
        errors: list[KafkaError] = []

        def on_delivery(err, _msg):
            if err is not None:
                errors.append(err)

        where: _Partition = {} if partition is None else {"partition": partition}
        for key, value in records:
            while True:
                try:
                    producer.produce(topic, key=key, value=value, on_delivery=on_delivery, **where)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
        remaining = producer.flush(timeout_s)
        if remaining or errors:
            self._drop_producer(producer)
            error = errors[0] if errors else KafkaError(KafkaError._TIMED_OUT, f"{remaining} {what} unsent")
            raise KafkaClusterError.on(self, f"write {what} to {topic}", error, acl={"TOPIC": ("WRITE", topic)})
        return len(records)


def _offset_partitions(offsets: Mapping[tuple[str, int], int],
                       metadata: Mapping[tuple[str, int], str]) -> list[TopicPartition]:
    return [TopicPartition(t, p, o, metadata=metadata[(t, p)]) if metadata.get((t, p)) else TopicPartition(t, p, o)
            for (t, p), o in sorted(offsets.items())]


class _Partition(TypedDict, total=False):
    """The partition a produce names, when it names one (else the partitioner picks)."""

    partition: int


class _DescribesCluster(Protocol):
    """What ``_settle`` calls: an ``AdminClient``, or the counting proxy around one (``call_count.Counted``)."""

    def describe_cluster(self, **kwargs: Any) -> Future: ...


def _settle(client: _DescribesCluster, timeout_s: float) -> None:
    """Wait until a new admin client has moved from its bootstrap connection to the brokers it learned.

    Why: librdkafka (2.10 and later) drops the bootstrap connection as soon as the first metadata names the
    brokers. A request that went out on it in that instant is lost, and the admin call behind it is retried
    only on a timer: it returns seconds late (every copy lane and every batch's report starts new clients;
    figures: docs/benchmarks.md). A DescribeCluster first, which needs no ACL and is not delayed
    that way, returns once the learned brokers are up. Best effort: a cluster that does not
    answer in ``timeout_s`` fails the real call, with its own error, instead.
    """
    try:
        client.describe_cluster(request_timeout=timeout_s).result(timeout=timeout_s)
    except Exception:  # noqa: BLE001 - the call that follows reports the cluster's trouble in its own words
        pass
