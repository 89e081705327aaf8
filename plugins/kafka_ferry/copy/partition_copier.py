"""Copy one source partition into the same destination partition, in order, exactly once per record.

Per partition: resume from the destination's tail (records a crashed attempt wrote, found by their
provenance), read ``[start, end)`` under read_committed (aborted records and control markers never
surface), produce each record with its key, value, headers and CreateTime to the same partition
through an idempotent producer, learn each destination offset from the delivery reports (two per
consume() batch, see ``copy.delivery`` for why that is exact), feed the contiguous runs to the sync
tracker, then,
once records and syncs are acknowledged, write the partition's progress. A crash anywhere leaves either
progress that covers everything before it, or copied records the next attempt finds on the tail.
Without provenance headers the tail cannot be recognised and a retry re-copies: at-least-once. The loop
guard holds either way: a record whose provenance names the destination cluster is never copied back.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, TopicPartition

from kafka_ferry.copy.copier_settings import (
    CONSUMER_CONFIG,
    FAILURE_REPORTS_TIMEOUT_S,
    FLUSH_TIMEOUT_S,
    METADATA_TIMEOUT_S,
    PRODUCER_CONFIG,
    collector_paused,
)
from kafka_ferry.copy.copy_failures import UnmappedSchemaId, delivery_failure, read_failure
from kafka_ferry.copy.delivery import ChunkAcks, CopyError
from kafka_ferry.copy.destination_tail import copied_pairs
from kafka_ferry.copy.faults import Faults
from kafka_ferry.copy.plan import CopyPlan, PartitionTask
from kafka_ferry.copy.range_copy import ChunkProducer, RangeCursor, StallWatch
from kafka_ferry.copy.report import PartitionResult
from kafka_ferry.copy.sync_writer import OffsetSyncWriter
from kafka_ferry.copy.throttle import BatchPace
from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.offsets.offset_sync_policy import PartitionSyncTracker, SyncPoint
from kafka_ferry.core.offsets.provenance import (
    SOURCE_CLUSTER_HEADER,
    copy_headers,
)
from kafka_ferry.core.schemas.schema_wire import SchemaIdRewriter, UnknownSchemaId
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.state.progress import save_progress
from kafka_ferry.state.store import MigrationStateStore

log = logging.getLogger(__name__)


class PartitionCopier:
    """Copies whole partitions one after another; one per Spark task (clients are reused)."""

    def __init__(self, plan: CopyPlan, source, destination, sync_writer: OffsetSyncWriter,
                 store: MigrationStateStore, faults: Faults | None = None, pace: BatchPace | None = None) -> None:
        self.plan = plan
        # the rate limit share and deadline this copier's task copies under (shared by its lanes)
        self.pace = pace or BatchPace(plan.rate_limit, plan.deadline_ms)
        self.source = source
        self.destination = destination
        self.sync_writer = sync_writer
        self.store = store
        self.faults = faults or Faults(None)
        self._fatal: KafkaError | None = None
        self.producer = destination.producer(**PRODUCER_CONFIG, error_cb=self._on_producer_error)
        self.consumer = source.consumer(**{**CONSUMER_CONFIG, "group.id": f"kafka-ferry-copy.{plan.migration}"})
        self._known_topics: set[str] = set()
        self.schema_ids = None if plan.schema_id_map is None else SchemaIdRewriter(
            {int(k): v for k, v in plan.schema_id_map.items()}, plan.unknown_schema_id_policy)
        # per source topic the fields the id map applies to; a plan without the decision (older) rewrites both
        self.serialized_fields = plan.serialized_fields

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(FLUSH_TIMEOUT_S)

    def copy(self, task: PartitionTask, progress: PartitionProgress | None,
             share_deadline_ms: int | None = None) -> PartitionResult:
        """Copy the task's range from its stored progress; ``share_deadline_ms``: this partition's share of the
        window (``core.batches.batch_window.share_deadline``), where it stops as at the window's deadline."""
        started = time.monotonic()
        previous: tuple[int, int] | None = None
        if (progress is not None and progress.last_upstream_offset is not None
                and progress.last_downstream_offset is not None):  # recorded together
            previous = (progress.last_upstream_offset, progress.last_downstream_offset)
        tracker = PartitionSyncTracker(self.plan.offset_sync_interval, previous=previous)
        start = max(task.start_offset, progress.next_upstream_offset if progress else 0)
        result = PartitionResult(task.source_topic, task.partition, task.destination_topic,
                                 task.start_offset, task.end_offset, start, start,
                                 share_bytes_per_second=self.pace.limit.bytes_per_second,
                                 share_records_per_second=self.pace.limit.records_per_second)

        def emit(points: list[SyncPoint]) -> None:
            for point in points:
                self.sync_writer.write(task.source_topic, task.partition, point)
            result.syncs_written += len(points)

        if self.plan.provenance_headers:
            start = self._resume_from_tail(task, progress, tracker, emit, result, start)
            result.start_offset = result.next_upstream_offset = start
        if start < task.end_offset:
            try:
                with collector_paused():
                    self._copy_range(task, start, tracker, emit, result, share_deadline_ms)
            except (KafkaException, SystemError) as exc:  # a fatal producer error surfaces from produce/flush
                raise self._delivery_error(task, exc) from None
        emit(tracker.finish())
        self.sync_writer.flush()
        self._write_progress(task, progress, tracker, result)
        self.faults.hit("after_partition", task.source_topic, task.partition)
        result.duration_s = round(time.monotonic() - started, 3)
        result.throttled_s = round(result.throttled_s, 3)
        log.info("copied %s-%s: %s", task.source_topic, task.partition, result.as_dict())
        return result

    def _remapper(self, task: PartitionTask):
        """What the hot loop calls per record of this task's topic, or None when nothing of it is rewritten."""
        schema_ids = self.schema_ids
        if schema_ids is None:
            return None
        fields = "both" if self.serialized_fields is None else self.serialized_fields.get(task.source_topic)
        if fields is None:  # the planner decides every topic it plans; a hand-made plan must too
            raise CopyError(f"{task.source_topic}: the plan does not say which fields carry schema ids")
        rewrite_key, rewrite_value = fields in ("key", "both"), fields in ("value", "both")
        if not (rewrite_key or rewrite_value):
            return None  # not registry-serialized: byte for byte, no id ever looked at
        return functools.partial(self._remapped, rewrite=schema_ids.rewrite, rewrite_key=rewrite_key,
                                 rewrite_value=rewrite_value)

    def _remapped(self, task: PartitionTask, offset: int, key, value, *,
                  rewrite: Callable[[bytes | None], bytes | None], rewrite_key: bool = True,
                  rewrite_value: bool = True):
        """Key and value with destination schema ids (``rewrite``: the plan's id map): the 4 id bytes change, nothing
        else (`core.schemas.schema_wire`); only in the fields the topic's decision names
        (`core.schemas.serialized_fields`)."""
        field = "key"
        try:
            if rewrite_key:
                key = rewrite(key)
            field = "value"
            if rewrite_value:
                value = rewrite(value)
            return key, value
        except UnknownSchemaId as exc:
            raise UnmappedSchemaId(task.source_topic, task.partition, offset, field, exc.schema_id) from None

    def _resume_from_tail(self, task, progress, tracker, emit, result, start: int) -> int:
        known = (progress.last_downstream_offset if progress is not None else None, task.resume_after)
        after = max((o for o in known if o is not None), default=None)
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

    def _copy_range(self, task: PartitionTask, start: int, tracker, emit, result: PartitionResult,
                    share_deadline_ms: int | None = None) -> None:
        """The hot loop, MirrorMaker's ``poll()`` shape: read a batch, copy it as one chunk, watch for a stall,
        serve the delivery reports; per record only what the guarantees need, bookkeeping per batch."""
        acks = self._acks = ChunkAcks(self.destination, task.destination_topic, task.partition,
                                      self.plan.source_cluster_id, tracker, emit,
                                      self._fault_hook(task) if self.faults else None)
        self._learn_topic(task.source_topic)
        self.consumer.assign([TopicPartition(task.source_topic, task.partition, start)])
        cursor = RangeCursor(start, task.end_offset, self.plan.max_records_per_partition,
                             self.plan.max_bytes_per_partition)
        # Without provenance a chunk could not be read back from the tail: a delivery report per record.
        producer = ChunkProducer(self.producer.produce, self.producer.poll, acks, task.destination_topic,
                                 task.partition, per_record=not self.plan.provenance_headers)
        stall = StallWatch(start)
        tp = TopicPartition(task.source_topic, task.partition)
        cluster_header = ((SOURCE_CLUSTER_HEADER, self.plan.source_cluster_id.encode())
                          if self.plan.provenance_headers else None)
        remap = self._remapper(task)  # remap-mode schema migration, on the topic's serialized fields only
        pace = self.pace
        while not cursor.done:
            # between two chunks: everything read so far is produced (the window's deadline or this partition's
            # share of it: the same clean stop, reported as "deadline")
            if pace.past_deadline(share_deadline_ms):
                cursor.stop_at_deadline()
                break
            messages = self.consumer.consume(cursor.batch_size(pace.chunk_records()), 0.2)
            records, size = cursor.copied, cursor.copied_bytes
            self._copy_batch(task, messages, cursor, producer, cluster_header, remap)
            position = None if cursor.done else self.consumer.position([tp])[0].offset
            if position is not None:
                cursor.position_moved(position)
            stall.check(task, bool(messages), cursor, position)
            self.producer.poll(0)
            acks.settle()
            # The rate limit: the chunk is out; wait out its cost before the next one, serving delivery reports.
            # (charged even when the range is done: the lanes share the bucket)
            wait = pace.charge(cursor.copied - records, cursor.copied_bytes - size)
            if wait > 0 and not cursor.done:
                waited = pace.wait(wait, self.producer.poll)
                result.throttled_s += waited
                stall.rested(waited)
                acks.settle()
        result.records_copied, result.bytes_copied = cursor.copied, cursor.copied_bytes
        result.records_skipped_loop, result.capped = cursor.skipped, cursor.capped
        result.stopped_at_deadline = cursor.at_deadline
        self._drain(task, acks)
        self.faults.hit("after_produce", task.source_topic, task.partition)
        result.next_upstream_offset = cursor.next_offset

    def _copy_batch(self, task: PartitionTask, messages, cursor: RangeCursor, producer: ChunkProducer,
                    cluster_header: tuple[str, bytes] | None, remap) -> None:
        """One consume() batch as one chunk: each record through the loop guard, provenance and the schema id
        remap, produced in order; the chunk's last record goes out with the report that closes it."""
        producer.open_chunk()
        topic, partition = task.source_topic, task.partition
        destination_cluster = self.plan.destination_cluster_id
        faults = self.faults if self.faults else None
        for msg in messages:
            if msg.error():
                raise self._read_error(task, cursor.next_offset, msg.error())
            if msg.partition() != partition or msg.topic() != topic:
                continue  # fetched for the previous assignment of this reused consumer
            offset = msg.offset()
            if offset >= cursor.end:
                cursor.reached_end()
                break
            cursor.next_offset = offset + 1
            copy, headers = copy_headers(msg.headers(), offset, destination_cluster, cluster_header)
            if not copy:
                cursor.skipped += 1
                continue
            if faults is not None and faults.armed("before_produce", topic, partition, cursor.copied):
                if producer.held is not None:  # "n records produced": the held one too, before the crash
                    producer.produce_last(producer.held)
                faults.hit("before_produce", topic, partition, cursor.copied)
            producer.release_held()
            key, value = msg.key(), msg.value()
            if remap is not None:
                key, value = remap(task, offset, key, value)
            ts_type, ts = msg.timestamp()
            producer.hold(offset, (key, value, headers, ts if ts_type != TIMESTAMP_NOT_AVAILABLE else 0))
            if cursor.count(key, value):
                break
        producer.close_chunk()

    def _learn_topic(self, topic: str) -> None:
        """Ask for a topic's metadata before this reused consumer is first assigned one of its partitions.

        Why: librdkafka's consumer learns the leader of a newly assigned, unknown topic only on its next 1 s
        metadata tick, so every partition of a lane's second, third... topic started with up to 1 s of idling
        (figures: docs/benchmarks.md). A failed ask costs only that time: the copy
        loop reports a topic it cannot read.
        """
        if topic in self._known_topics:
            return
        try:
            self.consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
        except KafkaException:
            pass
        self._known_topics.add(topic)

    def _fault_hook(self, task: PartitionTask):
        """Crash tests: ``after_produce:<n>`` fires once n records are acknowledged (and observed)."""
        def hit(before: int, after: int) -> None:
            for n in range(before + 1, after + 1):
                self.faults.hit("after_produce", task.source_topic, task.partition, n)
        return hit

    def _drain(self, task: PartitionTask, acks: ChunkAcks) -> None:
        remaining = self.producer.flush(FLUSH_TIMEOUT_S)
        acks.settle()
        if acks.error is not None:
            raise self._delivery_error(task, None)
        if remaining or acks.pending:
            raise KafkaClusterError.on(self.destination,
                                       f"copy to {task.destination_topic}-{task.partition}",
                                       TimeoutError(f"{sum(len(c.upstream) for c in acks.pending)} records "
                                       "unacknowledged after flush"))

    def _delivery_error(self, task: PartitionTask, exc: Exception | None) -> KafkaClusterError:
        # Serve every report still queued before naming the cause: the refused record's chunk error and the
        # fatal error (error_cb) may not have been served yet when a later produce() raised. After a fatal
        # error librdkafka purges what it held, so this returns as soon as those reports are out.
        try:
            self.producer.flush(FAILURE_REPORTS_TIMEOUT_S)
        except (KafkaException, SystemError):
            pass
        return delivery_failure(self.source, self.destination, task, self._acks, self._fatal, exc)

    def _on_producer_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fatal = error

    def _read_error(self, task: PartitionTask, offset: int, error: KafkaError) -> Exception:
        return read_failure(self.source, task, self.plan.migration, offset, error)

    def _write_progress(self, task, progress, tracker, result: PartitionResult) -> None:
        moved = progress is None or result.next_upstream_offset > progress.next_upstream_offset
        if not (moved or result.records_copied or result.records_resumed):
            return
        last = tracker.last_observed
        save_progress(self.store, [PartitionProgress(
            source_topic=task.source_topic,
            partition=task.partition,
            destination_topic=task.destination_topic,
            next_upstream_offset=result.next_upstream_offset,
            last_upstream_offset=last.upstream_offset if last else None,
            last_downstream_offset=last.downstream_offset if last else None,
            records_copied=(progress.records_copied if progress else 0) + result.records_copied
            + result.records_resumed,
            batch_id=self.plan.batch_id,
        )])
