"""An in-memory Kafka cluster for unit tests: ``kafka_ferry.kafka.protocol.Cluster`` without brokers.

It behaves like the brokers where kafka-ferry depends on it, and ``tests/integration/test_fakes_contract.py`` holds
it and the real ``KafkaCluster`` (test bed) to the same answers:

- a partition is a log with a start and an end offset; ``truncate`` moves the start as retention would, a produce
  appends at the end; the log keeps every record (a compacted topic's reader applies last-value-per-key itself,
  as it must on Kafka, where the cleaner runs late);
- a group has committed (offset, metadata) per partition and members; ``join`` adds a live member, and a commit
  to a group with members is refused as the broker refuses it (UNKNOWN_MEMBER_ID);
- ``admin`` answers the ACL calls and the principal's rights as Kafka's authorizer does (``fakes.admin``);
- a missing topic answers like a missing topic: no partitions, no description, an error on listing its offsets.

Reads go through ``consumer()``: assign, poll, consume, position, incremental_unassign, close, with the partition
EOF events the readers of ``kafka.reads`` and the state store wait for. Partitions take turns in chunks, as fetches
interleave partitions. A log may be synthetic (``SyntheticLog``: N records made on demand), which the 10k-partition
scale bench (``bench/scale_fake.py``) builds on.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from fakes.admin import FakeAdmin
from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.common.cluster_model import ClusterInfo, GroupInfo, TopicInfo
from kafka_ferry.kafka.errors import ClusterUnreachableError, KafkaClusterError

CHUNK = 500  # records a fetch returns for one partition before another partition's turn
BASE_TS_MS = 1_700_000_000_000

TP = tuple[str, int]


class _Eof:
    """The error a consumer with ``enable.partition.eof`` returns at a partition's end."""

    def code(self) -> int:
        return KafkaError._PARTITION_EOF


_EOF = _Eof()


class FakeMessage:
    """A ``confluent_kafka.Message`` as the readers use it (the real type cannot be built from Python)."""

    __slots__ = ("_tp", "_offset", "_key", "_value", "_error", "_headers", "_ts")

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
                 timestamp_ms: int = BASE_TS_MS, headers: list[tuple[str, bytes]] | None = None,
                 error: Any = None) -> None:
        self._tp = (topic, partition)
        self._offset, self._key, self._value, self._error = offset, key, value, error
        self._headers, self._ts = headers, timestamp_ms

    def topic(self) -> str:
        return self._tp[0]

    def partition(self) -> int:
        return self._tp[1]

    def offset(self) -> int:
        return self._offset

    def error(self) -> Any:
        return self._error

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return 1, self._ts  # TIMESTAMP_CREATE_TIME


Headers = list[tuple[str, bytes]] | None


class Log:
    """One partition's records; offsets count from 0, ``start`` is the first one retention kept."""

    def __init__(self) -> None:
        # (key, value, timestamp ms, headers)
        self.records: list[tuple[bytes | None, bytes | None, int, Headers]] = []
        self.start = 0

    @property
    def end(self) -> int:
        return len(self.records)

    def append(self, key: bytes | None, value: bytes | None, timestamp_ms: int, headers: Headers = None) -> int:
        self.records.append((key, value, timestamp_ms, headers))
        return self.end - 1

    def read(self, topic: str, partition: int, position: int, count: int) -> list[FakeMessage]:
        first = max(position, self.start)
        return [FakeMessage(topic, partition, o, key, value, timestamp_ms=ts, headers=headers)
                for o in range(first, min(self.end, first + count))
                for key, value, ts, headers in [self.records[o]]]

    def offset_for_time(self, timestamp_ms: int) -> int:
        """The first offset whose timestamp is at or after ``timestamp_ms``; -1 when there is none (Kafka's answer)."""
        for offset in range(self.start, self.end):
            if self.records[offset][2] >= timestamp_ms:
                return offset
        return -1


class SyntheticLog(Log):
    """``size`` records made on demand (key ``k<offset>``, value ``v<offset>``): a large log without the memory."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    @property
    def end(self) -> int:
        return self.size

    def append(self, key: bytes | None, value: bytes | None, timestamp_ms: int, headers: Headers = None) -> int:
        raise NotImplementedError("a synthetic log is read-only")

    def read(self, topic: str, partition: int, position: int, count: int) -> list[FakeMessage]:
        first = max(position, self.start)
        return [FakeMessage(topic, partition, o, b"k%d" % o, b"v%d" % o, timestamp_ms=BASE_TS_MS + o)
                for o in range(first, min(self.size, first + count))]

    def offset_for_time(self, timestamp_ms: int) -> int:
        offset = max(self.start, timestamp_ms - BASE_TS_MS)
        return offset if offset < self.size else -1


@dataclass
class FakeTopic:
    partitions: list[Log]
    replication_factor: int
    configs: dict[str, str]


@dataclass
class FakeGroup:
    offsets: dict[TP, tuple[int, str]] = field(default_factory=dict)
    members: set[str] = field(default_factory=set)


class FakeConsumer:
    """An assigned (never subscribed) consumer over a ``FakeCluster``'s logs."""

    def __init__(self, cluster: FakeCluster, config: Mapping[str, Any]) -> None:
        self._cluster = cluster
        self._eof = bool(config.get("enable.partition.eof", False))
        self._position: dict[TP, int] = {}
        self._turns: deque[TP] = deque()
        self._at_end: set[TP] = set()  # partitions whose EOF was reported at their current end
        self.closed = False

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            key = (tp.topic, tp.partition)
            log = self._cluster._log(key)
            self._position[key] = tp.offset if tp.offset >= 0 else log.start
            self._turns.append(key)

    def incremental_unassign(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self._position.pop(key, None)  # its turn is dropped when it comes up (no O(n) removal per call)

    def position(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        asked = list(partitions)
        self._cluster.calls["position_entries"] += len(asked)
        return [TopicPartition(tp.topic, tp.partition, self._position.get((tp.topic, tp.partition), -1001))
                for tp in asked]

    def poll(self, timeout: float = -1) -> FakeMessage | None:
        got = self.consume(1, timeout)
        return got[0] if got else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[FakeMessage]:
        if self.closed:
            raise RuntimeError("consumer closed")
        out: list[FakeMessage] = []
        for _ in range(len(self._turns)):
            if len(out) >= num_messages or not self._turns:
                break
            tp = self._turns[0]
            if tp not in self._position:
                self._turns.popleft()
                continue
            log = self._cluster._log(tp)
            position = max(self._position[tp], log.start)
            batch = log.read(tp[0], tp[1], position, min(CHUNK, num_messages - len(out)))
            out += batch
            self._position[tp] = position + len(batch)
            if batch:
                self._at_end.discard(tp)
            if self._position[tp] >= log.end and self._eof and tp not in self._at_end and len(out) < num_messages:
                out.append(FakeMessage(tp[0], tp[1], log.end, None, None, error=_EOF))
                self._at_end.add(tp)
            self._turns.rotate(-1)
        return out

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> list[str]:
        """Metadata of ``topic`` (all when None): the names the principal may describe; a topic named in the
        cluster's ``slow_metadata`` times out as a broker that does not answer in ``timeout``."""
        self._cluster.requests.append(("metadata", topic or "", timeout))
        if topic in self._cluster.slow_metadata:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no metadata in time"))
        return [t for t in self._cluster.list_topic_names() if topic in (None, t)]

    def close(self) -> None:
        self.closed = True


class FakeProducer:
    """A producer onto a ``FakeCluster``: ``produce`` appends at once (the record has its offset), and the delivery
    reports are served, in produce order, by ``poll`` and ``flush`` as librdkafka serves them."""

    def __init__(self, cluster: FakeCluster, config: Mapping[str, Any]) -> None:
        self._cluster = cluster
        self._reports: deque[tuple[Any, FakeMessage]] = deque()

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None, partition: int = -1,
                on_delivery: Any = None, timestamp: int = 0, headers: Headers = None, **_: Any) -> None:
        target = partition if partition >= 0 else (zlib.crc32(key) % len(self._cluster.topics[topic].partitions)
                                                   if key else 0)
        ts = timestamp or int(time.time() * 1000)
        offset = self._cluster._log((topic, target)).append(key, value, ts, headers)
        self._reports.append((on_delivery, FakeMessage(topic, target, offset, key, value, ts, headers)))

    def poll(self, timeout: float = 0) -> int:
        served = 0
        while self._reports:
            callback, msg = self._reports.popleft()
            if callback is not None:
                callback(None, msg)
            served += 1
        return served

    def flush(self, timeout: float = -1) -> int:
        self.poll()
        return 0

    def __len__(self) -> int:
        return len(self._reports)


class FakeCluster:
    """An in-memory cluster of ``brokers`` brokers (see the module's docstring for what it promises)."""

    def __init__(self, name: str = "fake", brokers: int = 1, principal: str = "User:ANONYMOUS",
                 super_users: Iterable[str] = ("User:ANONYMOUS",)) -> None:
        self.name = name
        self.bootstrap_servers = f"{name}.invalid:9092"
        self._principal = principal
        self.brokers = brokers
        # the authorizer (fakes.admin): the ACLs, and who passes every check (the test bed's super users)
        self.authorizer = True
        self.super_users = set(super_users)
        self.acls: list[AclEntry] = []
        # entries a CreateAcls answers with this error code for (a test's fault: a create that fails part way;
        # Kafka answers each binding of a CreateAcls request on its own)
        self.acl_create_errors: dict[AclEntry, int] = {}
        self.topics: dict[str, FakeTopic] = {}
        self.groups: dict[str, FakeGroup] = {}
        self.calls: Counter[str] = Counter()  # what was asked, for tests counting requests
        self.requests: list[tuple[Any, ...]] = []  # admin and metadata requests (fakes.admin, a consumer's), in order
        self.slow_metadata: set[str] = set()  # topics whose metadata a consumer asks for in vain (a timeout)
        self.reachable = True  # False: no bootstrap address accepts a connection (check_reachable refuses)

    def __repr__(self) -> str:
        return f"FakeCluster({self.name!r})"

    @property
    def principal(self) -> str | None:
        return self._principal

    @property
    def admin(self) -> FakeAdmin:
        """What ``kafka.acls`` asks through ``cluster.admin``: ACLs and the principal's rights (``fakes.admin``)."""
        return FakeAdmin(self)

    def as_principal(self, principal: str) -> FakeCluster:
        """The same cluster (topics, groups, ACLs) reached by another connection, authenticated as ``principal``."""
        view = FakeCluster(self.name, self.brokers, principal)
        view.topics, view.groups, view.acls, view.super_users, view.calls, view.requests = (
            self.topics, self.groups, self.acls, self.super_users, self.calls, self.requests)
        view.acl_create_errors = self.acl_create_errors
        return view

    def grant(self, *entries: AclEntry) -> None:
        """An administrator adds ACLs (as ``kafka-acls --add``), from outside kafka-ferry."""
        self.acls += [e for e in entries if e not in self.acls]

    # --- test set-up: what a test does to the cluster from outside ------------------------------
    def join(self, group: str, member: str = "member-1") -> None:
        """A live member joins ``group`` (a consumer of the application, not kafka-ferry)."""
        self.groups.setdefault(group, FakeGroup()).members.add(member)

    def leave(self, group: str, member: str = "member-1") -> None:
        self.groups[group].members.discard(member)

    def truncate(self, topic: str, partition: int, before: int) -> None:
        """Retention: the log of (topic, partition) starts at ``before`` from now on (never moves back)."""
        log = self._log((topic, partition))
        log.start = max(log.start, min(before, log.end))

    def add_log(self, topic: str, logs: list[Log], configs: Mapping[str, str] | None = None) -> None:
        """A topic whose partitions are the given logs (synthetic ones for a large bench)."""
        self.topics[topic] = FakeTopic(logs, 1, dict(configs or {}))

    def _log(self, tp: TP) -> Log:
        topic = self.topics.get(tp[0])
        if topic is None or not 0 <= tp[1] < len(topic.partitions):
            raise KafkaClusterError.on(self, f"read {tp[0]}-{tp[1]}", KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART),
                                       acl={"TOPIC": ("DESCRIBE", tp[0])})
        return topic.partitions[tp[1]]

    # --- cluster and topics ---------------------------------------------------------------------
    def check_reachable(self, timeout_s: float = 1.0) -> None:
        if not self.reachable:
            raise ClusterUnreachableError(self.name, {self.bootstrap_servers: "connection refused"})

    def describe_cluster(self) -> ClusterInfo:
        self.calls["describe_cluster"] += 1
        return ClusterInfo(cluster_id=f"{self.name}-id", broker_count=self.brokers)

    def list_topic_names(self) -> list[str]:
        """Every topic the principal may DESCRIBE (the brokers' metadata leaves the others out)."""
        return sorted(t for t in self.topics if self.admin.allowed("TOPIC", t, "DESCRIBE"))

    def list_partitions(self, topics: Iterable[str]) -> set[TP]:
        topics = set(topics)
        self.requests.append(("list_partitions", tuple(sorted(topics))))
        listed = set(self.list_topic_names())
        return {(t, p) for t in topics & listed for p in range(len(self.topics[t].partitions))}

    def partitions_of(self, topics: Iterable[str]) -> list[TP]:
        return sorted(self.list_partitions(topics))

    def describe_topics(self, names: Iterable[str]) -> dict[str, TopicInfo]:
        listed = set(self.list_topic_names())
        return {n: TopicInfo(n, len(t.partitions), t.replication_factor, dict(t.configs))
                for n in sorted(set(names) & listed) if (t := self.topics.get(n)) is not None}

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]) -> bool:
        return self.create_topics([(name, partitions, replication_factor, configs)])[name]

    def create_topics(self, topics: Iterable[tuple[str, int, int, Mapping[str, str]]]) -> dict[str, bool]:
        created: dict[str, bool] = {}
        for name, partitions, rf, configs in topics:
            if rf > self.brokers:
                raise KafkaClusterError.on(self, f"create topic {name}",
                                           KafkaError(KafkaError.INVALID_REPLICATION_FACTOR),
                                           acl={"TOPIC": ("CREATE", name)})
            created[name] = name not in self.topics
            if created[name]:
                self.topics[name] = FakeTopic([Log() for _ in range(partitions)], rf, dict(configs))
        return created

    def grow_partitions(self, name: str, total: int) -> None:
        topic = self.topics[name]
        if total <= len(topic.partitions):
            raise KafkaClusterError.on(self, f"grow partitions of {name}", KafkaError(KafkaError.INVALID_PARTITIONS),
                                       acl={"TOPIC": ("ALTER", name)})
        topic.partitions += [Log() for _ in range(total - len(topic.partitions))]

    def set_topic_configs(self, name: str, configs: Mapping[str, str | None]) -> None:
        self.set_topics_configs({name: configs})

    def set_topics_configs(self, configs: Mapping[str, Mapping[str, str | None]]) -> None:
        for name, changes in configs.items():
            for key, value in changes.items():
                if value is None:
                    self.topics[name].configs.pop(key, None)
                else:
                    self.topics[name].configs[key] = value

    # --- offsets --------------------------------------------------------------------------------
    def list_offsets(self, partitions: Iterable[TP], which: str = "latest", timestamp_ms: int | None = None,
                     read_committed: bool = True) -> dict[TP, int]:
        self.calls["list_offsets"] += 1
        out: dict[TP, int] = {}
        for tp in partitions:
            log = self._log(tp)
            if which == "earliest":
                out[tp] = log.start
            elif which == "latest":
                out[tp] = log.end
            elif which == "time" and timestamp_ms is not None:
                out[tp] = log.offset_for_time(timestamp_ms)
            else:
                raise ValueError(f"which={which!r}")
        return out

    # --- consumer groups ------------------------------------------------------------------------
    def list_group_ids(self) -> list[str]:
        return sorted(self.groups)

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupInfo]:
        out = {}
        for gid in sorted(set(group_ids)):
            group = self.groups.get(gid)
            state = "DEAD" if group is None else ("STABLE" if group.members else "EMPTY")
            out[gid] = GroupInfo(gid, state, len(group.members) if group else 0)
        return out

    def streams_group_topology(self, group_ids: Iterable[str]) -> dict[str, Any]:
        """No KIP-1071 streams groups here (as the real client without its Java helper configured)."""
        return {}

    def group_offsets(self, group_id: str) -> dict[TP, int]:
        return self.groups_offsets([group_id])[group_id]

    def group_offsets_with_metadata(self, group_id: str) -> dict[TP, tuple[int, str]]:
        return self.groups_offsets_with_metadata([group_id])[group_id]

    def groups_offsets(self, group_ids: Iterable[str]) -> dict[str, dict[TP, int]]:
        return {g: {tp: o for tp, (o, _) in offsets.items()}
                for g, offsets in self.groups_offsets_with_metadata(group_ids).items()}

    def groups_offsets_with_metadata(self, group_ids: Iterable[str]) -> dict[str, dict[TP, tuple[int, str]]]:
        return {g: dict(self.groups[g].offsets) if g in self.groups else {} for g in sorted(set(group_ids))}

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TP, int],
                            metadata: Mapping[TP, str] | None = None) -> None:
        error = self.alter_groups_offsets({group_id: (offsets, metadata)})[group_id]
        if error is not None:
            raise error

    def alter_groups_offsets(self, commits: Mapping[str, tuple[Mapping[TP, int], Mapping[TP, str] | None]]
                             ) -> dict[str, KafkaClusterError | None]:
        outcome: dict[str, KafkaClusterError | None] = {}
        for group_id, (offsets, metadata) in commits.items():
            self.calls["alter_group_offsets"] += 1
            group = self.groups.get(group_id)
            operation = f"commit offsets of group {group_id}"
            if group is not None and group.members:
                outcome[group_id] = KafkaClusterError.on(self, operation, KafkaError(KafkaError.UNKNOWN_MEMBER_ID),
                                                         acl={"GROUP": ("READ", group_id)})
                continue
            missing = [tp for tp in offsets if tp[0] not in self.topics]
            if missing:
                outcome[group_id] = KafkaClusterError.on(self, operation,
                                                         KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART),
                                                         acl={"GROUP": ("READ", group_id),
                                                              "TOPIC": ("DESCRIBE", missing[0][0])})
                continue
            group = self.groups.setdefault(group_id, FakeGroup())
            for tp, offset in offsets.items():
                group.offsets[tp] = (offset, (metadata or {}).get(tp, ""))
            outcome[group_id] = None
        return outcome

    # --- writes and reads -----------------------------------------------------------------------
    def produce_and_wait(self, topic: str, records: Iterable[tuple[bytes, bytes | None]], *,
                         partition: int | None = None, timeout_s: float = 60.0, what: str = "records") -> int:
        """Append every record (to ``partition``, else by key hash, else partition 0); returns how many."""
        records = list(records)
        self.calls["produce_and_wait"] += 1
        if topic not in self.topics:
            raise KafkaClusterError.on(self, f"write {what} to {topic}", KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART),
                                       acl={"TOPIC": ("WRITE", topic)})
        logs = self.topics[topic].partitions
        now_ms = int(time.time() * 1000)  # create time, as the producer stamps it
        for key, value in records:
            target = partition if partition is not None else (zlib.crc32(key) % len(logs) if key else 0)
            self._log((topic, target)).append(key, value, now_ms)
        return len(records)

    def consumer(self, **overrides: Any) -> FakeConsumer:
        self.calls["consumers"] += 1
        return FakeConsumer(self, overrides)

    def producer(self, **overrides: Any) -> FakeProducer:
        self.calls["producers"] += 1
        return FakeProducer(self, overrides)

    def produce(self, topic: str, partition: int, *records: tuple[bytes | None, bytes | None, Headers],
                timestamp_ms: int | None = None) -> None:
        """Another producer (an application, not kafka-ferry) writes ``(key, value, headers)`` records, stamped
        ``timestamp_ms`` (default: now)."""
        stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        for key, value, headers in records:
            self._log((topic, partition)).append(key, value, stamp, headers)
