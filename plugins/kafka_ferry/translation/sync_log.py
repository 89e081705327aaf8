"""Read and write the MM2-format internal topics: offset syncs in, checkpoints out (and back in, for checks).

Why a module of its own: translation, the sensors and the tests read the same topics; decoding lives in
``core.mm2_wire``, this is only the Kafka side. Records are read to the topic's end under read_committed;
a record that does not decode fails loudly with its offset (the log is the translation's only evidence).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from confluent_kafka import KafkaError

from kafka_ferry.core.mm2_wire import (
    HEARTBEATS_TOPIC,
    Checkpoint,
    Heartbeat,
    OffsetSync,
    WireFormatError,
    checkpoints_topic,
    offset_syncs_topic,
    remote_heartbeats_topic,
)
from kafka_ferry.core.offset_sync_policy import SyncPoint
from kafka_ferry.core.spec import MigrationSpec
from kafka_ferry.hooks.kafka_cluster import KafkaClusterError, KafkaClusterHook
from kafka_ferry.io.partition_reader import read_whole_partitions

log = logging.getLogger(__name__)


def sync_log_hook(spec: MigrationSpec, source: KafkaClusterHook, destination: KafkaClusterHook) -> KafkaClusterHook:
    """The cluster holding the offset-sync topic: always the destination."""
    return destination


def read_offset_syncs(hook: KafkaClusterHook, topic: str) -> dict[tuple[str, int], list[SyncPoint]]:
    """Every sync in the topic, per (source topic, partition), in log order (duplicates kept)."""
    if topic not in hook.list_topic_names():
        log.warning("offset-sync topic %s does not exist yet: no syncs", topic)
        return {}
    syncs: dict[tuple[str, int], list[SyncPoint]] = defaultdict(list)
    for msg in read_whole_partitions(hook, [(topic, 0)]):
        if msg.value() is None:
            continue
        try:
            sync = OffsetSync.from_record(msg.key(), msg.value())
        except WireFormatError as exc:
            raise WireFormatError(f"{topic}@{msg.offset()}: {exc}") from exc
        syncs[(sync.topic, sync.partition)].append(SyncPoint(sync.upstream_offset, sync.downstream_offset))
    return dict(syncs)


def read_migration_syncs(spec: MigrationSpec, source: KafkaClusterHook,
                         destination: KafkaClusterHook) -> dict[tuple[str, int], list[SyncPoint]]:
    return read_offset_syncs(sync_log_hook(spec, source, destination), offset_syncs_topic(spec.destination.alias))


def read_checkpoints(hook: KafkaClusterHook, topic: str) -> dict[tuple[str, str, int], Checkpoint]:
    """The newest checkpoint per (group, destination topic, partition)."""
    if topic not in hook.list_topic_names():
        return {}
    latest: dict[tuple[str, str, int], Checkpoint] = {}
    for msg in read_whole_partitions(hook, [(topic, 0)]):
        if msg.value() is None:
            continue
        cp = Checkpoint.from_record(msg.key(), msg.value())
        latest[(cp.consumer_group, cp.topic, cp.partition)] = cp
    return latest


def write_checkpoints(spec: MigrationSpec, destination: KafkaClusterHook, checkpoints: Iterable[Checkpoint]) -> int:
    """Produce checkpoints to ``<source alias>.checkpoints.internal`` (partition 0) and wait for every ack."""
    return produce_keyed(destination, checkpoints_topic(spec.source.alias),
                         [(cp.key_bytes(), cp.value_bytes()) for cp in checkpoints])


def write_heartbeat(spec: MigrationSpec, destination: KafkaClusterHook, timestamp_ms: int) -> Heartbeat:
    """One MM2 heartbeat (source alias -> destination alias) to ``heartbeats`` (what MM2's heartbeat task writes
    on the target) and to ``<source alias>.heartbeats`` (what MM2 mirrors from the source), so MM2's tooling
    (``RemoteClusterUtils.upstreamClusters``/``replicationHops``) sees the flow. Topics are made if missing."""
    heartbeat = Heartbeat(spec.source.alias, spec.destination.alias, timestamp_ms)
    existing = set(destination.list_topic_names())
    for topic in (HEARTBEATS_TOPIC, remote_heartbeats_topic(spec.source.alias)):
        if topic not in existing:
            destination.create_topic(topic, 1, min(3, destination.describe_cluster().broker_count),
                                     {"cleanup.policy": "compact"})
        produce_keyed(destination, topic, [(heartbeat.key_bytes(), heartbeat.value_bytes())])
    return heartbeat


def produce_keyed(hook: KafkaClusterHook, topic: str, records: list[tuple[bytes, bytes]], partition: int = 0) -> int:
    """Idempotent, acks=all produce of (key, value) pairs to one partition; raises on any failed delivery."""
    if not records:
        return 0
    producer = hook.producer(**{"acks": "all", "enable.idempotence": True, "linger.ms": 5})
    errors: list[KafkaError] = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    for key, value in records:
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=partition, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(60)
    if remaining or errors:
        error = errors[0] if errors else KafkaError(KafkaError._TIMED_OUT, f"{remaining} records unsent")
        raise KafkaClusterError.on(hook, f"write to {topic}", error,
                                   acl={"TOPIC": ("WRITE", topic)})
    return len(records)
