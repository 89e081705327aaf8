"""A tiny, single-process stand-in for the Spark copy batch, for translation/promotion tests only.

It honours the contract the real copier (issue 3) keeps: committed source records copied in order with
provenance headers, offset syncs from ``PartitionSyncTracker`` (MM2 format, source topic name), then
progress (``next_upstream_offset`` = copied end, ``last_*`` = last copied record) written after the acks.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

from kafka_ferry.core.mm2_wire import OffsetSync, offset_syncs_topic
from kafka_ferry.core.offset_sync_policy import PartitionSyncTracker
from kafka_ferry.core.progress import PROGRESS_KIND, PartitionProgress
from kafka_ferry.core.provenance import provenance_headers, user_headers
from kafka_ferry.core.spec import MigrationSpec
from kafka_ferry.hooks.kafka_cluster import KafkaClusterHook
from kafka_ferry.io.partition_reader import read_ranges
from kafka_ferry.io.state_store import MigrationStateStore
from kafka_ferry.translation.sync_log import produce_keyed
from kafka_ferry.translation.translate import read_progress


def copy_batch(spec: MigrationSpec, source: KafkaClusterHook, destination: KafkaClusterHook,
               topics: list[str], max_records: int | None = None) -> int:
    """Copy [stored next offset, LSO) of every partition of ``topics``; returns records copied."""
    store = MigrationStateStore(destination, spec.state_topic_name)
    progress = read_progress(store)
    cluster_id = source.describe_cluster().cluster_id
    parts = source.partitions_of(topics)
    starts = source.list_offsets(parts, "earliest")
    ends = source.list_offsets(parts, "latest")
    ranges = {}
    for tp in parts:
        start = progress[tp].next_upstream_offset if tp in progress else starts[tp]
        end = ends[tp] if max_records is None else min(ends[tp], start + max_records)
        ranges[tp] = (start, end)

    producer = destination.producer(**{"acks": "all", "enable.idempotence": True, "linger.ms": 5})
    delivered: dict[tuple[str, int], list[tuple[int, int]]] = {tp: [] for tp in parts}
    errors: list[KafkaError] = []

    def on_delivery(err, msg, tp=None, up=None):
        if err is not None:
            errors.append(err)
        else:
            delivered[tp].append((up, msg.offset()))

    for msg in read_ranges(source, ranges):
        tp = (msg.topic(), msg.partition())
        headers = user_headers(msg.headers()) + provenance_headers(cluster_id, msg.offset())
        producer.produce(spec.topics.rename.destination_topic(tp[0]), key=msg.key(), value=msg.value(),
                         partition=tp[1], timestamp=msg.timestamp()[1], headers=headers,
                         on_delivery=lambda err, m, tp=tp, up=msg.offset(): on_delivery(err, m, tp, up))
        producer.poll(0)
    assert producer.flush(60) == 0 and not errors, errors

    syncs, records = [], {}
    for tp, (start, end) in ranges.items():
        before = progress.get(tp)
        previous = None
        if before is not None and before.last_upstream_offset is not None:
            previous = (before.last_upstream_offset, before.last_downstream_offset)
        tracker = PartitionSyncTracker(spec.copy_settings.offset_sync_interval, previous)
        pairs = delivered[tp]
        for up, down in pairs:
            syncs += [OffsetSync(tp[0], tp[1], s.upstream_offset, s.downstream_offset) for s in tracker.observe(up, down)]
        syncs += [OffsetSync(tp[0], tp[1], s.upstream_offset, s.downstream_offset) for s in tracker.finish()]
        last = pairs[-1] if pairs else previous
        records[f"{tp[0]}:{tp[1]}"] = PartitionProgress(
            tp[0], tp[1], spec.topics.rename.destination_topic(tp[0]), max(end, start),
            last[0] if last else None, last[1] if last else None,
            (before.records_copied if before else 0) + len(pairs), "stub").as_record()
    produce_keyed(destination, offset_syncs_topic(spec.destination.alias),
                  [(s.key_bytes(), s.value_bytes()) for s in syncs])
    store.put_many(PROGRESS_KIND, records)
    return sum(len(v) for v in delivered.values())
