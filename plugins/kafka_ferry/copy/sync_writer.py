"""Writes MM2 offset syncs (``core.offsets.mm2_wire.OffsetSync``) to the offset-syncs topic, acknowledged by all
replicas.

One writer per Spark task, shared by the partitions it copies. ``flush`` raises if any sync was not
acknowledged: progress must never be written for a partition whose syncs may be missing, or exact
translation would silently interpolate across an unrecorded discontinuity.
"""

from __future__ import annotations

from kafka_ferry.core.offsets.mm2_wire import OffsetSync
from kafka_ferry.core.offsets.offset_sync_policy import SyncPoint
from kafka_ferry.kafka.errors import KafkaClusterError

PRODUCER_CONFIG = {"acks": "all", "enable.idempotence": True, "linger.ms": 20}
FLUSH_TIMEOUT_S = 60.0


class OffsetSyncWriter:
    def __init__(self, clients, topic: str) -> None:
        self._clients = clients
        self.topic = topic
        self._producer = clients.producer(**PRODUCER_CONFIG)
        self._errors: list = []
        self.written = 0

    def write(self, source_topic: str, partition: int, point: SyncPoint) -> None:
        sync = OffsetSync(source_topic, partition, point.upstream_offset, point.downstream_offset)
        self._producer.produce(self.topic, key=sync.key_bytes(), value=sync.value_bytes(), partition=0,
                               on_delivery=self._on_delivery)
        self._producer.poll(0)

    def _on_delivery(self, err, _msg) -> None:
        if err is not None:
            self._errors.append(err)
        else:
            self.written += 1

    def flush(self) -> None:
        remaining = self._producer.flush(FLUSH_TIMEOUT_S)
        if self._errors or remaining:
            error = self._errors[0] if self._errors else TimeoutError(f"{remaining} offset syncs unacknowledged")
            raise KafkaClusterError.on(self._clients, f"write offset syncs to {self.topic}", error,
                                       acl={"TOPIC": ("WRITE", self.topic)})
