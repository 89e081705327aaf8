"""Read what a crashed or retried attempt already wrote to a destination partition, from provenance headers.

Why: progress is written only after a partition's records and syncs are acknowledged, so a crash in
between leaves copied records that progress does not cover. Every record past the last progressed
downstream offset whose provenance names this source cluster was copied by such an attempt; its
(upstream, downstream) pair tells the copy where to resume and which syncs are still owed. The same
read maps a produced chunk to exact offsets when foreign records share its range (``copy.delivery``).
"""

from __future__ import annotations

import time

from confluent_kafka import TopicPartition

from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.kafka.errors import KafkaClusterError

READ_TIMEOUT_S = 120.0


def copied_pairs(destination, topic: str, partition: int, after_offset: int | None,
                 source_cluster_id: str, end: int | None = None) -> list[tuple[int, int]]:
    """(upstream, downstream) offsets of records from ``source_cluster_id`` after ``after_offset``, in order.

    ``after_offset`` is the last downstream offset progress covers (None: read the whole partition).
    Reads to the high watermark (``end`` when given) uncommitted: the copy's producer is not transactional, and another
    producer's open transaction must not stall the resume.
    """
    tp = (topic, partition)
    if end is None:  # ``end``: the high watermark, when the caller read many partitions' together
        end = destination.list_offsets([tp], "latest", read_committed=False)[tp]
    start = 0 if after_offset is None else after_offset + 1
    if start >= end:  # the common case, nothing past progress: skip the log-start lookup
        return []
    start = max(start, destination.list_offsets([tp], "earliest", read_committed=False)[tp])
    return provenance_pairs(destination, topic, partition, start, end, source_cluster_id)


def provenance_pairs(destination, topic: str, partition: int, start: int, end: int,
                     source_cluster_id: str) -> list[tuple[int, int]]:
    """(upstream, downstream) of the records in downstream ``[start, end)`` whose provenance names the source."""
    if start >= end:
        return []
    consumer = destination.consumer(**{"group.id": "kafka-ferry-resume", "isolation.level": "read_uncommitted",
                                       "enable.auto.offset.store": False, "auto.offset.reset": "earliest"})
    pairs: list[tuple[int, int]] = []
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                if msg.error():
                    raise KafkaClusterError.on(destination, f"read tail of {topic}-{partition}",
                                               msg.error(),
                                               acl={"TOPIC": ("READ", topic),
                                                    "GROUP": ("DESCRIBE", "kafka-ferry-resume")})
                if msg.offset() >= end:
                    return pairs
                cluster, upstream = read_provenance(msg.headers())
                if cluster == source_cluster_id and upstream is not None:
                    pairs.append((upstream, msg.offset()))
                if msg.offset() + 1 >= end:
                    return pairs
            if consumer.position([TopicPartition(topic, partition)])[0].offset >= end:
                return pairs
        raise KafkaClusterError.on(destination, f"read tail of {topic}-{partition}",
                                   TimeoutError(f"offsets [{start}, {end}) not read within {READ_TIMEOUT_S:.0f} s"))
    finally:
        consumer.close()
