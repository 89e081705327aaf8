"""The named steps of copying one partition's range (``PartitionCopier._copy_range``): the range's cursor and
counters, the produce-and-chunk step, and the stall watch.

Why these pieces: the copy loop is a hot loop (per record only what the guarantees need), and its exactness
rests on three separate rules that are easier to check one at a time:

- ``RangeCursor``: where the copy is, when it is done (planned end, a cap of records or bytes, the window's
  deadline between two chunks), what it copied;
- ``ChunkProducer``: a consume() batch is one chunk; every record of it but the last is produced with no delivery
  report (or the chunk's first-report), the last is held back and produced with the report that closes the chunk,
  so two reports per chunk tell every destination offset (``copy.delivery``). Without provenance headers a
  record is its own chunk: a chunk could not be read back from the tail, so every record gets its report;
- ``StallWatch``: a range that neither returns records nor moves its position for ``STALL_TIMEOUT_S`` fails,
  naming the offset (source truncated or unreachable), instead of waiting for the task's timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, MutableSequence
from typing import Any, Protocol

from kafka_ferry.copy.copier_settings import CONSUME_BATCH, STALL_TIMEOUT_S
from kafka_ferry.copy.delivery import Chunk, CopyError
from kafka_ferry.copy.plan import PartitionTask

Record = tuple  # (key, value, headers, timestamp), as produce() takes them


class RangeCursor:
    """Where the copy of ``[start, end)`` is, and what it copied; ``done`` at the end or at a cap."""

    def __init__(self, start: int, end: int, max_records: int, max_bytes: int) -> None:
        self.end, self.max_records, self.max_bytes = end, max_records, max_bytes
        self.next_offset = start
        self.copied = self.copied_bytes = self.skipped = 0
        self.done = self.capped = self.at_deadline = False

    def batch_size(self, bound: int | None = None) -> int:
        """consume() waits for all it asks for: near the end ask only for what is left, or it idles. ``bound``:
        a rate limit's chunk size (``copy.throttle``)."""
        return min(CONSUME_BATCH if bound is None else max(1, bound), max(1, self.end - self.next_offset))

    def stop_at_deadline(self) -> None:
        """The window's deadline came between two chunks: the range ends where it is, everything before it
        produced (``next_offset`` is the first offset not copied), as a cap ends it."""
        self.done = self.at_deadline = True

    def reached_end(self) -> None:
        self.next_offset, self.done = self.end, True

    def count(self, key: bytes | None, value: bytes | None) -> bool:
        """Count one copied record; True when a cap stops the range here (before its planned end)."""
        self.copied += 1
        self.copied_bytes += (len(key) if key else 0) + (len(value) if value else 0)
        if (self.copied >= self.max_records or self.copied_bytes >= self.max_bytes) and self.next_offset < self.end:
            self.capped = self.done = True
        return self.done

    def position_moved(self, position: int) -> None:
        """The consumer's position after a batch: past the end (aborted records, markers) ends the range."""
        if position >= self.end:
            self.reached_end()


class Acks(Protocol):
    """What a ``ChunkProducer`` uses of ``delivery.ChunkAcks``: the chunk being produced, the produced chunks
    awaiting their reports, and a settle once reports came in."""

    open: Chunk | None

    @property
    def pending(self) -> MutableSequence[Chunk]: ...

    def settle(self) -> object: ...


class ChunkProducer:
    """Produces a range's records chunk by chunk to one destination partition (see the module's docstring)."""

    def __init__(self, produce: Callable, poll: Callable, acks: Acks, topic: str, partition: int,
                 per_record: bool) -> None:
        self.produce, self.poll, self.acks = produce, poll, acks
        self.topic, self.partition, self.per_record = topic, partition, per_record
        self.held: Record | None = None
        # the delivery callback of the chunk's first record; None once that record is produced
        self.first_report: Callable[[Any, Any], None] | None = None
        self.open_chunk()

    def open_chunk(self) -> None:
        self.chunk = self.acks.open = Chunk()
        self.first_report = self.chunk.on_first
        self.held = None

    def release_held(self) -> None:
        """A next record is coming: the held one goes out now (closing its own chunk when per record)."""
        held = self.held
        if held is None:
            return
        if self.per_record:
            self.produce_last(held)
            self.open_chunk()
            return
        try:
            self.produce(self.topic, held[1], held[0], self.partition, on_delivery=self.first_report,
                         timestamp=held[3], headers=held[2])
        except BufferError:  # local queue full: the slow path serves reports and retries
            self.produce_waiting(held, self.first_report)
        self.first_report = None
        self.held = None

    def hold(self, offset: int, record: Record) -> None:
        self.held = record
        self.chunk.upstream.append(offset)

    def close_chunk(self) -> None:
        """End of a consume() batch: the held record goes out with the report that closes the chunk."""
        if self.held is not None:
            self.produce_last(self.held)

    def produce_last(self, record: Record | None) -> None:
        """Produce the chunk's last record (unless already produced) with the report that closes it."""
        chunk = self.chunk
        if record is not None:
            self.produce_waiting(record, chunk.on_only if len(chunk.upstream) == 1 else chunk.on_last)
        self.acks.pending.append(chunk)

    def produce_waiting(self, record: Record, on_delivery) -> None:
        key, value, headers, timestamp = record
        while True:
            try:
                self.produce(self.topic, value, key, self.partition, on_delivery=on_delivery, timestamp=timestamp,
                             headers=headers)
                return
            except BufferError:  # local queue full: serve delivery reports, then retry
                self.poll(0.05)
                self.acks.settle()


class StallWatch:
    """Fails a range that has neither returned a record nor moved its position for ``STALL_TIMEOUT_S``.

    ``clock``: seconds on a monotonic clock (a test hands its own, to pass a stall's time without waiting it)."""

    def __init__(self, position: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.last_activity, self.last_position = clock(), position

    def rested(self, seconds: float) -> None:
        """The copier waited ``seconds`` on the rate limit: no stall, it did not ask for records meanwhile."""
        self.last_activity += seconds

    def check(self, task: PartitionTask, got_records: bool, cursor: RangeCursor, position: int | None) -> None:
        """After a batch: ``position`` is the consumer's (None once the range is done)."""
        at = self.last_position if position is None else position
        now = self.clock()
        if got_records or at > self.last_position:  # skipping aborted records moves only the position
            self.last_activity, self.last_position = now, at
        elif not cursor.done and now - self.last_activity > STALL_TIMEOUT_S:
            raise CopyError(f"{task.source_topic}-{task.partition}: no record for {STALL_TIMEOUT_S:.0f} s at "
                            f"offset {cursor.next_offset}, planned end {cursor.end} (source truncated or "
                            "unreachable?)")
