"""Shared pieces of the benchmarks: seeding a source topic and counting what reached the destination.

Benchmarks print figures and ratios measured side by side in one run (these machines are noisy); they
are never tests.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "testbed"))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import kafka_testbed as tb  # noqa: E402


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def drop_topics(run_name: str) -> None:
    """Delete every topic on both clusters whose name holds ``run_name`` (a bench run's own), and wait for it."""
    for bootstrap in (tb.SOURCE.bootstrap, tb.DESTINATION.bootstrap):
        client = admin(bootstrap)
        names = [t for t in client.list_topics(timeout=30).topics if run_name in t]
        for future in (client.delete_topics(names, operation_timeout=60).values() if names else ()):
            future.result(90)


def create_topic(bootstrap: str, name: str, partitions: int, config: dict | None = None) -> None:
    client = admin(bootstrap)  # kept alive until the result is in: a collected client cancels the request
    client.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(60)


def seed(topic: str, partitions: int, records: int, record_bytes: int) -> float:
    """Fill `topic` with `records` records of `record_bytes` bytes round-robin; returns seconds taken."""
    producer = Producer({"bootstrap.servers": tb.SOURCE.bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "compression.type": "none", "queue.buffering.max.kbytes": 1_048_576})
    payload = os.urandom(record_bytes)
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=payload, partition=i % partitions,
                                 headers=[("bench", b"1")])
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(300)
    return time.monotonic() - started


def settle(pause_s: float = 2.0) -> None:
    """Before a timed copy: write the page cache's dirty pages out (the seed's or the previous copier's gigabyte),
    then let the machine go idle, so no copier pays for the one before it. Without it the copier run right after
    the seed was the slowest of all on this 2-core VM (16.3 s against 10.1-12.8 s for the same copy later)."""
    os.sync()
    time.sleep(pause_s)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


def topic_exists(bootstrap: str, topic: str) -> bool:
    return topic in admin(bootstrap).list_topics(timeout=10).topics


def rate(records: int, record_bytes: int, seconds: float) -> dict:
    return {"seconds": round(seconds, 2), "records_per_s": round(records / seconds),
            "mb_per_s": round(records * record_bytes / seconds / 1e6, 1)}
