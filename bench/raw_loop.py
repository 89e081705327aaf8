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
