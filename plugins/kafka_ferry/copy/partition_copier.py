"""Copy one source partition into the same destination partition, in order, exactly once per record.

Per partition: resume from the destination's tail (records a crashed attempt wrote, found by their
provenance), read ``[start, end)`` under read_committed (aborted records and control markers never
surface), produce each record with its key, value, headers and CreateTime to the same partition
through an idempotent producer, learn each destination offset from the delivery reports (in produce
order: idempotence keeps a partition's order), feed (upstream, downstream) to the sync tracker, then,
once records and syncs are acknowledged, write the partition's progress. A crash anywhere leaves either
progress that covers everything before it, or copied records the next attempt finds on the tail.
Without provenance headers the tail cannot be recognised and a retry re-copies: at-least-once. The loop
guard holds either way: a record whose provenance names the destination cluster is never copied back.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import asdict, dataclass

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, TopicPartition

from kafka_ferry.copy.destination_tail import copied_pairs
from kafka_ferry.copy.faults import Faults
from kafka_ferry.copy.plan import CopyPlan, PartitionTask
from kafka_ferry.copy.sync_writer import OffsetSyncWriter
from kafka_ferry.core.offset_sync_policy import PartitionSyncTracker, SyncPoint
from kafka_ferry.core.progress import PROGRESS_KIND, PartitionProgress
from kafka_ferry.core.provenance import is_loop, provenance_headers, user_headers
from kafka_ferry.io.kafka_errors import KafkaClusterError
from kafka_ferry.io.state_store import MigrationStateStore

log = logging.getLogger(__name__)

# Resume trusts the destination tail to be a prefix of what was produced, so no record may fail while a
# later one lands: gapless turns such errors fatal, and no message timeout (0 = none) means a record is
# either delivered or still queued when the task gives up (after FLUSH_TIMEOUT_S) or dies.
PRODUCER_CONFIG = {
    "enable.idempotence": True,
    "acks": "all",
    "enable.gapless.guarantee": True,
    "message.timeout.ms": 0,
    "linger.ms": 20,
    "batch.num.messages": 10000,
    "queue.buffering.max.messages": 500000,
}
# No group commits: positions live in the state topic. An offset below the log start is an error,
# never a silent jump (retention deleted records after planning).
CONSUMER_CONFIG = {
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "error",
    "enable.partition.eof": False,
    # One partition at a time: let each fetch bring more than the 1 MB default so the loop never waits.
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "queued.max.messages.kbytes": 256 * 1024,
}
CONSUME_BATCH = 5000
STALL_TIMEOUT_S = 120.0
FLUSH_TIMEOUT_S = 120.0


class CopyError(RuntimeError):
    """A partition cannot be copied safely; the message says which and why."""


@dataclass
class PartitionResult:
    """What one partition's copy did; the driver collects these (small, no record data)."""

    source_topic: str
    partition: int
    destination_topic: str
    planned_start: int
    planned_end: int
    start_offset: int
    next_upstream_offset: int
    records_copied: int = 0
    bytes_copied: int = 0
    records_resumed: int = 0
    records_skipped_loop: int = 0
    syncs_written: int = 0
    capped: bool = False
    duration_s: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


class _InFlight:
    """Upstream offsets of produced records awaiting delivery reports, which arrive in produce order."""

    def __init__(self, task: PartitionTask, tracker: PartitionSyncTracker, emit, faults: Faults) -> None:
        self.task, self.tracker, self.emit, self.faults = task, tracker, emit, faults
        self.pending: deque[int] = deque()
        self.error: KafkaError | None = None
        self.acked = 0

    def on_delivery(self, err, msg) -> None:
        upstream = self.pending.popleft()
        if self.error is not None:
            return  # after a failure nothing may be observed: the sync log must stay a prefix
        if err is not None:
            self.error = err
            return
        self.emit(self.tracker.observe(upstream, msg.offset()))
        self.acked += 1
        self.faults.hit("after_produce", self.task.source_topic, self.task.partition, self.acked)


class PartitionCopier:
    """Copies whole partitions one after another; one per Spark task (clients are reused)."""

    def __init__(self, plan: CopyPlan, source, destination, sync_writer: OffsetSyncWriter,
                 store: MigrationStateStore, faults: Faults | None = None) -> None:
        self.plan = plan
        self.source = source
        self.destination = destination
        self.sync_writer = sync_writer
        self.store = store
        self.faults = faults or Faults(None)
        self.producer = destination.producer(**PRODUCER_CONFIG)
        self.consumer = source.consumer(**{**CONSUMER_CONFIG, "group.id": f"kafka-ferry-copy.{plan.migration}"})

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(FLUSH_TIMEOUT_S)

    def copy(self, task: PartitionTask, progress: PartitionProgress | None) -> PartitionResult:
        started = time.monotonic()
        previous = None
        if progress is not None and progress.last_upstream_offset is not None:
            previous = (progress.last_upstream_offset, progress.last_downstream_offset)
        tracker = PartitionSyncTracker(self.plan.offset_sync_interval, previous=previous)
        start = max(task.start_offset, progress.next_upstream_offset if progress else 0)
        result = PartitionResult(task.source_topic, task.partition, task.destination_topic,
                                 task.start_offset, task.end_offset, start, start)

        def emit(points: list[SyncPoint]) -> None:
            for point in points:
                self.sync_writer.write(task.source_topic, task.partition, point)
            result.syncs_written += len(points)

        if self.plan.provenance_headers:
            start = self._resume_from_tail(task, progress, tracker, emit, result, start)
            result.start_offset = result.next_upstream_offset = start
        if start < task.end_offset:
            self._copy_range(task, start, tracker, emit, result)
        emit(tracker.finish())
        self.sync_writer.flush()
        self._write_progress(task, progress, tracker, result)
        self.faults.hit("after_partition", task.source_topic, task.partition)
        result.duration_s = round(time.monotonic() - started, 3)
        log.info("copied %s-%s: %s", task.source_topic, task.partition, result.as_dict())
        return result

    def _resume_from_tail(self, task, progress, tracker, emit, result, start: int) -> int:
        after = progress.last_downstream_offset if progress is not None else None
        pairs = copied_pairs(self.destination, task.destination_topic, task.partition, after,
                             self.plan.source_cluster_id)
        for upstream, downstream in pairs:
            last = tracker.last_observed
            if last is not None and (upstream <= last.upstream_offset or downstream <= last.downstream_offset):
                raise CopyError(
                    f"{task.destination_topic}-{task.partition} holds source offset {upstream} at downstream "
                    f"{downstream} after {tuple(last)}: the destination has duplicates or was written by another "
                    "copy of this source; inspect it before resuming")
            emit(tracker.observe(upstream, downstream))
            result.records_resumed += 1
            start = max(start, upstream + 1)
        if pairs:
            log.info("%s-%s: resumed %d records a previous attempt copied (last upstream %d)", task.source_topic,
                     task.partition, len(pairs), pairs[-1][0])
        return start

    def _copy_range(self, task: PartitionTask, start: int, tracker, emit, result: PartitionResult) -> None:
        inflight = _InFlight(task, tracker, emit, self.faults)
        tp = TopicPartition(task.source_topic, task.partition)
        self.consumer.assign([TopicPartition(task.source_topic, task.partition, start)])
        end, next_offset, last_activity, last_position = task.end_offset, start, time.monotonic(), start
        max_records, max_bytes = self.plan.max_records_per_partition, self.plan.max_bytes_per_partition
        done = False
        while not done:
            messages = self.consumer.consume(CONSUME_BATCH, 0.2)
            for msg in messages:
                if msg.error():
                    raise self._read_error(task, next_offset, msg.error())
                offset = msg.offset()
                if msg.partition() != task.partition or msg.topic() != task.source_topic:
                    continue  # fetched for the previous assignment of this reused consumer
                if offset >= end:
                    next_offset, done = end, True
                    break
                headers = msg.headers()
                next_offset = offset + 1
                if headers and is_loop(headers, self.plan.destination_cluster_id):
                    result.records_skipped_loop += 1
                    continue
                self.faults.hit("before_produce", task.source_topic, task.partition, result.records_copied)
                result.bytes_copied += self._produce(task, msg, headers, offset, inflight)
                result.records_copied += 1
                if (result.records_copied >= max_records or result.bytes_copied >= max_bytes) and next_offset < end:
                    result.capped = done = True
                    break
            position = last_position
            if not done:
                position = self.consumer.position([tp])[0].offset
                if position >= end:
                    next_offset, done = end, True
            now = time.monotonic()
            if messages or position > last_position:  # skipping aborted records moves only the position
                last_activity, last_position = now, position
            elif not done and now - last_activity > STALL_TIMEOUT_S:
                raise CopyError(f"{task.source_topic}-{task.partition}: no record for {STALL_TIMEOUT_S:.0f} s at "
                                f"offset {next_offset}, planned end {end} (source truncated or unreachable?)")
            self.producer.poll(0)
        self._drain(task, inflight)
        self.faults.hit("after_produce", task.source_topic, task.partition)
        result.next_upstream_offset = next_offset

    def _produce(self, task: PartitionTask, msg, headers, offset: int, inflight: _InFlight) -> int:
        if self.plan.provenance_headers:
            stamp = provenance_headers(self.plan.source_cluster_id, offset)
            headers = user_headers(headers) + stamp if headers else stamp
        kwargs = {}
        timestamp_type, timestamp = msg.timestamp()
        if timestamp_type != TIMESTAMP_NOT_AVAILABLE:
            kwargs["timestamp"] = timestamp
        key, value = msg.key(), msg.value()
        while True:
            try:
                self.producer.produce(task.destination_topic, value=value, key=key, partition=task.partition,
                                      headers=headers, on_delivery=inflight.on_delivery, **kwargs)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                self.producer.poll(0.05)
        inflight.pending.append(offset)
        return (len(key) if key else 0) + (len(value) if value else 0)

    def _drain(self, task: PartitionTask, inflight: _InFlight) -> None:
        remaining = self.producer.flush(FLUSH_TIMEOUT_S)
        if inflight.error is not None:
            raise KafkaClusterError(self.destination.kafka_config_id,
                                    f"copy to {task.destination_topic}-{task.partition}", inflight.error)
        if remaining or inflight.pending:
            raise KafkaClusterError(self.destination.kafka_config_id,
                                    f"copy to {task.destination_topic}-{task.partition}",
                                    TimeoutError(f"{len(inflight.pending)} records unacknowledged after flush"))

    def _read_error(self, task: PartitionTask, offset: int, error: KafkaError) -> Exception:
        hint = ""
        if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            hint = " (source retention deleted it after planning: plan the batch again)"
        return KafkaClusterError(self.source.kafka_config_id,
                                 f"read {task.source_topic}-{task.partition} at offset {offset}{hint}", error)

    def _write_progress(self, task, progress, tracker, result: PartitionResult) -> None:
        moved = progress is None or result.next_upstream_offset > progress.next_upstream_offset
        if not (moved or result.records_copied or result.records_resumed):
            return
        last = tracker.last_observed
        self.store.put(PROGRESS_KIND, task.key, PartitionProgress(
            source_topic=task.source_topic,
            partition=task.partition,
            destination_topic=task.destination_topic,
            next_upstream_offset=result.next_upstream_offset,
            last_upstream_offset=last.upstream_offset if last else None,
            last_downstream_offset=last.downstream_offset if last else None,
            records_copied=(progress.records_copied if progress else 0) + result.records_copied
            + result.records_resumed,
            batch_id=self.plan.batch_id,
        ).as_record())
