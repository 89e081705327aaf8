"""Read bounded offset ranges of many partitions with one consumer.

Why: translation, reconciliation and the sensors read internal topics and copied ranges to a known end.
A poll that returns nothing does not mean "done": under read_committed the consumer skips aborted
records and transaction markers, so a range is finished only when the consumer's *position* reaches its
end. One assigned (never subscribed) consumer serves every partition, so no group join is involved.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, cast

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.kafka.protocol import Cluster

DEFAULT_TIMEOUT_S = 120.0


Headers = list[tuple[str, bytes | None]]


def consumed_headers(msg: Message) -> Headers | None:
    """A consumed record's headers: a consumer returns (name, bytes) pairs or None (confluent-kafka's declared type
    also admits the dict and str forms only a producer accepts)."""
    return cast("Headers | None", msg.headers())


def consumed_partition(msg: Message) -> tuple[str, int]:
    """A consumed record's (topic, partition): a record, unlike an error event, always has both."""
    return cast(str, msg.topic()), cast(int, msg.partition())


class RangeSource(Protocol):
    """What ``read_ranges`` uses of a cluster: a consumer, and the name its errors carry (any ``Cluster``)."""

    name: str

    def consumer(self, **overrides: Any) -> Any: ...


def read_ranges(
    cluster: RangeSource,
    ranges: Mapping[tuple[str, int], tuple[int, int]],
    read_committed: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Iterator[Message]:
    """Yield the records of each ``(topic, partition) -> [start, end)``, in offset order per partition.

    Records of different partitions interleave. Raises ``KafkaClusterError`` if a range is not read to
    its end within ``timeout_s`` (the end must be at most the partition's end offset for the isolation).
    """
    pending = {tp: (start, end) for tp, (start, end) in ranges.items() if end > start}
    if not pending:
        return
    consumer = cluster.consumer(**{
        "group.id": "kafka-ferry-range-reader",
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        "fetch.wait.max.ms": 50,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    })
    try:
        consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in pending.items()])
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                left = ", ".join(f"{t}-{p}[{s},{e})" for (t, p), (s, e) in sorted(pending.items())[:5])
                raise KafkaClusterError.on(cluster, "read offset ranges",
                                           KafkaError(KafkaError._TIMED_OUT, f"not read to the end: {left}"))
            batch = consumer.consume(num_messages=1000, timeout=0.2)
            touched: set[tuple[str, int]] = set()
            for msg in batch:
                topic, partition, offset, error = msg.topic(), msg.partition(), msg.offset(), msg.error()
                if topic is not None and partition is not None:
                    touched.add((topic, partition))
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaClusterError.on(cluster, f"read {topic}-{partition}", error,
                                               acl={"TOPIC": ("READ", str(topic)),
                                               "GROUP": ("DESCRIBE", "kafka-ferry-range-reader")})
                tp = (topic, partition)  # a record (no error) always names both, and its offset
                if tp in pending and offset is not None and offset < pending[tp][1]:
                    yield msg
            # Only a partition that delivered something can have moved; an empty poll re-checks them all.
            _drop_finished(consumer, pending, touched if batch else None)
    finally:
        consumer.close()


def _drop_finished(consumer, pending: dict[tuple[str, int], tuple[int, int]],
                   among: set[tuple[str, int]] | None = None) -> None:
    """Stop reading partitions whose position reached their end (skipped markers count as read).

    ``among`` limits the check to those partitions (the ones the last poll delivered for), so a read of
    many partitions does not ask every pending position after every poll; None checks them all.
    """
    check = pending if among is None else [tp for tp in among if tp in pending]
    if not check:
        return
    positions = consumer.position([TopicPartition(t, p) for t, p in check])
    done = [TopicPartition(tp.topic, tp.partition) for tp in positions
            if tp.offset >= 0 and tp.offset >= pending[(tp.topic, tp.partition)][1]]
    for tp in done:
        del pending[(tp.topic, tp.partition)]
    if done and pending:
        consumer.incremental_unassign(done)


def read_whole_partitions(cluster: Cluster, partitions: list[tuple[str, int]],
                          read_committed: bool = True) -> Iterator[Message]:
    """Every record from the log start to the end of each partition (internal topics)."""
    starts = cluster.list_offsets(partitions, "earliest", read_committed=read_committed)
    ends = cluster.list_offsets(partitions, "latest", read_committed=read_committed)
    return read_ranges(cluster, {tp: (starts[tp], ends[tp]) for tp in partitions}, read_committed=read_committed)


READ_FETCH_WAIT_MS = 20


def start_reader(cluster: Cluster, topic: str, group_id: str, enable_eof: bool, start: int | None = None
                 ) -> Consumer:
    """A consumer assigned to partition 0 of ``topic`` at its earliest offset (or at ``start``, which the caller
    has checked is in the log), named as a number.

    Why not OFFSET_BEGINNING: librdkafka then looks the offset up itself and the first record arrives half a
    second later (figures: docs/benchmarks.md), and the state is read several times per task. Should the
    log start move between the lookup and the fetch, ``auto.offset.reset: earliest`` still starts at the
    first record there is. A short fetch wait: an empty fetch at the end answers at once.
    """
    if start is None:
        start = cluster.list_offsets([(topic, 0)], "earliest").get((topic, 0), 0)
    consumer = cluster.consumer(**{"group.id": group_id, "enable.partition.eof": enable_eof,
                                   "auto.offset.reset": "earliest", "fetch.wait.max.ms": READ_FETCH_WAIT_MS})
    consumer.assign([TopicPartition(topic, 0, start)])
    return consumer
