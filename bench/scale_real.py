"""``bench/scale.py --real N``: the planning and translation calls against the shared test bed for N partitions.

Creates one N-partition topic on each side (unique names), writes a few records per partition to both, and times
the cluster calls a plan and a translation make (partition listing, earliest/latest offsets, a group's committed
offsets) plus the range read of reconciliation; deletes both topics at the end, even on failure.
"""

from __future__ import annotations

import json
import os
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_ferry.core.batches.batch_planning import PartitionPosition, plan_ranges
from kafka_ferry.hooks.kafka_cluster import kafka_cluster
from kafka_ferry.kafka.reads import read_ranges

SOURCE = os.environ.get("KFERRY_SCALE_SOURCE", "127.0.0.1:19092")
DESTINATION = os.environ.get("KFERRY_SCALE_DESTINATION", "127.0.0.1:29092")
RECORDS = 3  # per partition


def _create(admin: AdminClient, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(120)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=30).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{name} not in metadata with {partitions} partitions")


def _fill(bootstrap: str, name: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for p in range(partitions):
        for i in range(RECORDS):
            producer.produce(name, b"v%d" % i, partition=p)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"records for {name} not acknowledged")


def _timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def run_real(partitions: int) -> dict:
    name = f"scale-real-{uuid.uuid4().hex[:8]}"
    admins = {"source": AdminClient({"bootstrap.servers": SOURCE}),
              "destination": AdminClient({"bootstrap.servers": DESTINATION})}
    for side, bootstrap in (("source", SOURCE), ("destination", DESTINATION)):
        os.environ[f"AIRFLOW_CONN_KF_SCALE_{side.upper()}"] = json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}})
    group = f"{name}-group"
    figures: dict[str, float] = {}
    try:
        for side, bootstrap in (("source", SOURCE), ("destination", DESTINATION)):
            _create(admins[side], name, partitions)
            _fill(bootstrap, name, partitions)
        committer = Consumer({"bootstrap.servers": SOURCE, "group.id": group, "enable.auto.commit": False})
        committer.commit(offsets=[TopicPartition(name, p, 1) for p in range(partitions)], asynchronous=False)
        committer.close()
        source, destination = kafka_cluster("kf_scale_source"), kafka_cluster("kf_scale_destination")
        figures["partitions_of"], tps = _timed(lambda: source.partitions_of([name]))
        figures["list_offsets_earliest"], starts = _timed(lambda: source.list_offsets(tps, "earliest"))
        figures["list_offsets_latest"], ends = _timed(lambda: source.list_offsets(tps, "latest"))
        figures["plan_batch"], _ = _timed(lambda: plan_ranges(
            [PartitionPosition(t, p, None, starts[(t, p)], ends[(t, p)]) for t, p in tps], 1_000))
        figures["group_committed_offsets"], _ = _timed(lambda: source.admin.list_consumer_group_offsets(
            [_group_request(group, tps)])[group].result(120))
        ranges = {tp: (0, RECORDS) for tp in tps}
        figures["read_ranges_source"], read = _timed(lambda: sum(1 for _ in read_ranges(source, ranges)))
        figures["read_ranges_destination"], _ = _timed(lambda: sum(1 for _ in read_ranges(destination, ranges)))
        if read != RECORDS * partitions:
            raise RuntimeError(f"read {read} records, expected {RECORDS * partitions}")
    finally:
        for admin in admins.values():
            try:
                admin.delete_topics([name])[name].result(120)
            except Exception as exc:  # noqa: BLE001 - report, keep cleaning the other side
                print(f"could not delete {name}: {exc}")
        try:
            admins["source"].delete_consumer_groups([group])[group].result(60)
        except Exception as exc:  # noqa: BLE001
            print(f"could not delete group {group}: {exc}")
    return {"partitions": partitions, "records_per_partition": RECORDS,
            "stages": {k: {"seconds": round(v, 3), "us_per_partition": round(v * 1e6 / partitions, 1)}
                       for k, v in figures.items()}}


def _group_request(group: str, tps):
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in tps])
