"""The reference limit: one Python process, confluent-kafka consume -> produce, no Spark, no bookkeeping.

Preserves partition, key, value, headers and timestamp like kafka-ferry, with the same producer
settings (idempotent, acks=all), so the gap to it is what kafka-ferry's machinery costs.
"""

from __future__ import annotations

import time

from _common import tb
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def raw_copy(source_topic: str, destination_topic: str, partitions: int, records: int) -> float:
    consumer = Consumer({"bootstrap.servers": tb.SOURCE.bootstrap, "group.id": "bench-raw",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
                         "queued.max.messages.kbytes": 262_144, "enable.partition.eof": False})
    producer = Producer({"bootstrap.servers": tb.DESTINATION.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 20, "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                         "compression.type": "none"})
    delivered = [0]

    def on_delivery(err, _msg):
        if err is None:
            delivered[0] += 1

    started = time.monotonic()
    consumer.assign([TopicPartition(source_topic, p, 0) for p in range(partitions)])
    consumed = 0
    while consumed < records:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(msg.error().str())
                continue
            while True:
                try:
                    producer.produce(destination_topic, key=msg.key(), value=msg.value(), partition=msg.partition(),
                                     timestamp=msg.timestamp()[1], headers=msg.headers(), on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            consumed += 1
        producer.poll(0)
    producer.flush(300)
    elapsed = time.monotonic() - started
    consumer.close()
    if delivered[0] != records:
        raise RuntimeError(f"raw loop delivered {delivered[0]} of {records}")
    return elapsed


def floor_copy(source_topic: str, destination_topic: str, partitions: int, lanes: int = 4) -> float:
    """The floor of a Python consume->produce copy: the copier's lanes, client settings, provenance headers and paused
    collector, and nothing else (no delivery reports, syncs, progress, loop guard, caps or pacing); seconds to copy
    every partition.

    What the copier's per-record CPU is measured against: a copier at this floor has no bookkeeping left to cut;
    a faster copy needs fewer Python calls per record, not a leaner loop."""
    import threading

    from kafka_ferry.copy.copier_settings import CONSUME_BATCH, CONSUMER_CONFIG, PRODUCER_CONFIG, collector_paused
    from kafka_ferry.core.offsets.provenance import SOURCE_CLUSTER_HEADER, SOURCE_OFFSET_HEADER

    stamp = (SOURCE_CLUSTER_HEADER, b"bench-floor-source-cluster")
    failures: list[BaseException] = []

    def lane(owned: list[int]) -> None:
        consumer = Consumer({**CONSUMER_CONFIG, "bootstrap.servers": tb.SOURCE.bootstrap, "group.id": "bench-floor"})
        producer = Producer({**PRODUCER_CONFIG, "bootstrap.servers": tb.DESTINATION.bootstrap})
        try:
            with collector_paused():  # the copier's hot loop runs with Python's cyclic collector paused too
                for partition in owned:
                    end = consumer.get_watermark_offsets(TopicPartition(source_topic, partition), timeout=10)[1]
                    consumer.assign([TopicPartition(source_topic, partition, 0)])
                    position = 0  # by offsets, not a count: offset gaps (markers, compaction) end it too
                    while position < end:
                        for msg in consumer.consume(CONSUME_BATCH, 0.2):
                            if msg.error():
                                raise RuntimeError(msg.error().str())
                            position = msg.offset() + 1
                            headers = msg.headers() or []
                            headers.append(stamp)
                            headers.append((SOURCE_OFFSET_HEADER, b"%d" % (position - 1)))
                            producer.produce(destination_topic, msg.value(), msg.key(), partition,
                                             timestamp=msg.timestamp()[1], headers=headers)
                        if position < end:
                            position = max(position, consumer.position([TopicPartition(source_topic, partition)])[0]
                                           .offset)
                        producer.poll(0)
                if producer.flush(120):
                    raise RuntimeError("records left unacknowledged")
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            failures.append(exc)
        finally:
            consumer.close()

    threads = [threading.Thread(target=lane, args=(list(range(i, partitions, lanes)),)) for i in range(lanes)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return time.monotonic() - started
