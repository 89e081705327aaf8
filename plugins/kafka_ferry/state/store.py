"""The migration's own state, kept in a compacted topic on the destination cluster.

Why Kafka and not Airflow's database: the state (provisioned topics and groups, copy progress, promotion)
must survive a reset of Airflow's metadata DB and be readable by the Spark job, which has no Airflow.
Each record is `<kind>/<key>` -> JSON, every kind declared in ``core.common.state_records``; compaction keeps the newest
value per key, a tombstone deletes it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError

from kafka_ferry.core.common.state_records import KINDS, StateKind, StateRecordError, decode, state_topic_problem
from kafka_ferry.core.provisioning.provisioning_plan import ProvisioningRefused
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.kafka.reads import start_reader

log = logging.getLogger(__name__)

STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "segment.ms": "3600000"}
# How old a kept read may be and still be brought forward by reading only what was appended after it. Compaction
# removes a record only when a newer one with its key follows it (which the read from there sees too), and a
# tombstone only after the broker's delete.retention.ms (24 h by default): far longer than this.
FORWARD_READ_MAX_AGE_S = 600.0


class MigrationStateStore:
    """Read-all / write-through access to one migration's state topic."""

    def __init__(self, cluster: Cluster, topic: str, clock: Callable[[], float] = time.time):
        """``clock``: seconds since the epoch, stamped on every record as its write time (tests fix it)."""
        self.cluster = cluster
        self.topic = topic
        self.clock = clock
        # The last read, by the end offset it was read to: the topic has one partition and only grows, so the
        # same end offset is the same records (a promotion's plan reads the state a dozen times between writes;
        # at 2,000 partitions each read was a consumer and a tenth of a second). Any write moves the end; the
        # next read then reads only the records after the kept end and applies them to it (``_read``).
        # (end offset, each kind's records as JSON, when it was read: time.monotonic())
        self._last_read: tuple[int, dict[StateKind, str], float] | None = None

    def ensure_topic(self) -> bool:
        """Create the state topic if missing (idempotent); returns True when it was created.

        An existing one must have the shape the store relies on (``check_topic``), else nothing is written."""
        brokers = self.cluster.describe_cluster().broker_count
        rf = min(3, brokers)
        configs = dict(STATE_TOPIC_CONFIGS, **({"min.insync.replicas": str(min(2, rf))} if rf > 1 else {}))
        created = self.cluster.create_topic(self.topic, 1, rf, configs)
        if not created:
            self.check_topic()
        return created

    def check_topic(self) -> bool:
        """Refuse (``ProvisioningRefused``) an existing state topic of another shape; False when it does not exist.

        Why: reads look at partition 0 only and rely on compaction keeping the newest value per key; on a topic
        with more partitions or another policy, progress, promotion marks and fence records would get lost."""
        info = self.cluster.describe_topics([self.topic]).get(self.topic)
        if info is None:
            return False
        problem = state_topic_problem(self.topic, info.partitions, info.configs.get("cleanup.policy"))
        if problem:
            raise ProvisioningRefused([problem])
        return True

    def put(self, kind: StateKind, key: str, value: Mapping[str, Any] | None) -> None:
        self.put_many(kind, {key: value})

    def put_many(self, kind: StateKind, values: Mapping[str, Mapping[str, Any] | None]) -> None:
        """Write records (None: a tombstone) and wait until every one is acknowledged by all in-sync replicas.

        Every record is checked against its kind's declaration before the first is sent."""
        now_ms = int(self.clock() * 1000)
        records = [_declared(kind).encode(key, value, now_ms) for key, value in values.items()]
        # partition 0 explicitly: the one partition every reader reads, whatever the producer's partitioner
        self.cluster.produce_and_wait(self.topic, records, partition=0, timeout_s=30, what="state records")

    def read_all(self) -> dict[StateKind, dict[str, dict[str, Any]]]:
        """Every live record, as {kind: {key: value}}; reads the topic from the start to its end.

        A kind no declaration knows (written by a newer kafka-ferry) is left out, with a warning. Read again
        only when the topic's end moved since the last read (a copy is returned: callers may change theirs).

        The last read is kept as each kind's JSON text, and a copy is parsed from it: every value came from JSON,
        so the copy is exact, and parsing is several times faster than ``copy.deepcopy`` (at 2,000 partitions a
        promotion reads the state a dozen times, and the deep copies were over a second of it)."""
        return self._read()

    def _read(self, only: StateKind | None = None) -> dict[StateKind, dict[str, dict[str, Any]]]:
        """``read_all``; ``only``: a kind that is all the caller needs (from the last read, only it is parsed)."""
        end = self._end_offset()
        kept = self._last_read
        if kept is not None and end is not None and kept[0] == end:
            return {kind: json.loads(text) for kind, text in kept[1].items() if only in (None, kind)}
        forward = self._forward_from(kept, end)
        texts: dict[StateKind, str] = dict(kept[1]) if forward is not None and kept is not None else {}
        # only the kinds a record of this read touches are parsed from the kept text, changed and written back
        state: dict[StateKind, dict[str, dict[str, Any]]] = {}
        unknown: set[str] = set()
        for raw_key, raw_value in self._records(end, forward):
            name, key, value = decode(raw_key, raw_value)
            kind = KINDS.get(name)
            if kind is None:
                unknown.add(name)
                continue
            records = state.get(kind)
            if records is None:
                records = state[kind] = json.loads(texts[kind]) if kind in texts else {}
            if value is None:
                records.pop(key, None)
            else:
                records[key] = value
        if unknown:
            log.warning("state topic %s holds records of undeclared kinds %s: left out", self.topic, sorted(unknown))
        texts.update((kind, json.dumps(records)) for kind, records in state.items())
        if end is not None:
            self._last_read = (end, texts, time.monotonic())
        return {kind: state[kind] if kind in state else json.loads(text) for kind, text in texts.items()
                if only in (None, kind)}

    def _forward_from(self, kept: tuple[int, dict[StateKind, str], float] | None, end: int | None) -> int | None:
        """The kept read's end offset when the new read may start there, else None (read from the log start):
        the topic grew since (not recreated: its end did not go back), the kept end is still in the log, and
        the kept read is recent (``FORWARD_READ_MAX_AGE_S``)."""
        if kept is None or end is None or end < kept[0] or time.monotonic() - kept[2] > FORWARD_READ_MAX_AGE_S:
            return None
        start = self.cluster.list_offsets([(self.topic, 0)], "earliest", read_committed=False).get((self.topic, 0), 0)
        return kept[0] if start <= kept[0] else None

    def read_kind(self, kind: StateKind) -> dict[str, dict[str, Any]]:
        return _declared(kind).records(self._read(kind))

    def _end_offset(self) -> int | None:
        """The state topic's end offset; None when the topic does not exist (a migration that never ran, or a dry
        run of one: no state yet, and reading creates none)."""
        try:
            return self.cluster.list_offsets([(self.topic, 0)], "latest", read_committed=False).get((self.topic, 0), 0)
        except KafkaClusterError:
            if self.topic in self.cluster.list_topic_names():
                raise
            return None

    def _records(self, end: int | None, start: int | None = None) -> Iterable[tuple[bytes, bytes | None]]:
        """The records up to ``end``, from ``start`` (else the log start)."""
        if end is None or end <= 0 or (start is not None and start >= end):
            return
        consumer = start_reader(self.cluster, self.topic, "kafka-ferry-state-reader", enable_eof=True, start=start)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                error, offset = msg.error(), msg.offset()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if offset is not None and offset >= end:
                            return
                        continue
                    raise KafkaClusterError.on(self.cluster, f"read state from {self.topic}", error,
                                               acl={"TOPIC": ("READ", self.topic),
                                               "GROUP": ("DESCRIBE", "kafka-ferry-state-reader")})
                key = msg.key()
                if key is None or offset is None:  # the store writes every record with its key
                    raise StateRecordError(f"state topic {self.topic}: a record without a key at offset {offset}")
                yield key, msg.value()
                if offset + 1 >= end:
                    return
            raise KafkaClusterError.on(self.cluster, f"read state from {self.topic}",
                                       KafkaError(KafkaError._TIMED_OUT, "state topic not read to its end in 60 s"))
        finally:
            consumer.close()


def _declared(kind: StateKind) -> StateKind:
    if not isinstance(kind, StateKind) or KINDS.get(kind.name) is not kind:
        raise TypeError(f"state kind {kind!r} is not declared in kafka_ferry.core.common.state_records")
    return kind
