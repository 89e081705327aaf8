"""Read and write the MM2-format internal topics: offset syncs in, checkpoints out (and back in, for checks).

Why a module of its own: translation, the sensors and the tests read the same topics; decoding lives in
``core.offsets.mm2_wire``, this is only the Kafka side. Records are read to the topic's end under read_committed;
a record that does not decode fails loudly with its offset (the log is the translation's only evidence).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from kafka_ferry.core.offsets.mm2_wire import (
    HEARTBEATS_TOPIC,
    Checkpoint,
    Heartbeat,
    OffsetSync,
    WireFormatError,
    checkpoints_topic,
    offset_syncs_topic,
    remote_heartbeats_topic,
)
from kafka_ferry.core.offsets.offset_sync_policy import SyncPoint
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.kafka.reads import read_whole_partitions

log = logging.getLogger(__name__)


def read_offset_syncs(cluster: Cluster, topic: str) -> dict[tuple[str, int], list[SyncPoint]]:
    """Every sync in the topic, per (source topic, partition), in log order (duplicates kept)."""
    if topic not in cluster.list_topic_names():
        log.warning("offset-sync topic %s does not exist yet: no syncs", topic)
        return {}
    syncs: dict[tuple[str, int], list[SyncPoint]] = defaultdict(list)
    for msg in read_whole_partitions(cluster, [(topic, 0)]):
        key, value = msg.key(), msg.value()
        if value is None:
            continue
        if key is None:
            raise WireFormatError(f"{topic}@{msg.offset()}: an offset sync without a key")
        try:
            sync = OffsetSync.from_record(key, value)
        except WireFormatError as exc:
            raise WireFormatError(f"{topic}@{msg.offset()}: {exc}") from exc
        syncs[(sync.topic, sync.partition)].append(SyncPoint(sync.upstream_offset, sync.downstream_offset))
    return dict(syncs)


def read_migration_syncs(spec: MigrationSpec, source: Cluster,
                         destination: Cluster) -> dict[tuple[str, int], list[SyncPoint]]:
    return read_offset_syncs(destination, offset_syncs_topic(spec.destination.alias))  # syncs live on the destination


def read_checkpoints(cluster: KafkaCluster, topic: str) -> dict[tuple[str, str, int], Checkpoint]:
    """The newest checkpoint per (group, destination topic, partition)."""
    if topic not in cluster.list_topic_names():
        return {}
    latest: dict[tuple[str, str, int], Checkpoint] = {}
    for msg in read_whole_partitions(cluster, [(topic, 0)]):
        key, value = msg.key(), msg.value()
        if value is None:
            continue
        if key is None:
            raise WireFormatError(f"{topic}@{msg.offset()}: a checkpoint without a key")
        cp = Checkpoint.from_record(key, value)
        latest[(cp.consumer_group, cp.topic, cp.partition)] = cp
    return latest


def write_checkpoints(spec: MigrationSpec, destination: KafkaCluster, checkpoints: Iterable[Checkpoint]) -> int:
    """Produce checkpoints to ``<source alias>.checkpoints.internal`` (partition 0) and wait for every ack."""
    return destination.produce_and_wait(checkpoints_topic(spec.source.alias),
                                        [(cp.key_bytes(), cp.value_bytes()) for cp in checkpoints], partition=0)


def write_heartbeat(spec: MigrationSpec, destination: KafkaCluster, timestamp_ms: int) -> Heartbeat:
    """One MM2 heartbeat (source alias -> destination alias) to ``heartbeats`` (what MM2's heartbeat task writes
    on the target) and to ``<source alias>.heartbeats`` (what MM2 mirrors from the source), so MM2's tooling
    (``RemoteClusterUtils.upstreamClusters``/``replicationHops``) sees the flow. Topics are made if missing."""
    heartbeat = Heartbeat(spec.source.alias, spec.destination.alias, timestamp_ms)
    existing = set(destination.list_topic_names())
    for topic in (HEARTBEATS_TOPIC, remote_heartbeats_topic(spec.source.alias)):
        if topic not in existing:
            destination.create_topic(topic, 1, min(3, destination.describe_cluster().broker_count),
                                     {"cleanup.policy": "compact"})
        destination.produce_and_wait(topic, [(heartbeat.key_bytes(), heartbeat.value_bytes())], partition=0)
    return heartbeat
