"""Learn the destination offset of every copied record from two delivery reports per chunk, never by guessing.

Why: a Python delivery callback per record cost more than the copy itself. The copier produces each
consume() batch as one *chunk* and asks for delivery reports on the chunk's first and last record only.

Why that is exact: one idempotent producer writes the partition and delivers in produce order, so the
chunk's n records land at strictly increasing offsets in ``[first, last]``. If ``last - first == n - 1``
those n offsets fill the range, so record i sits at ``first + i`` (no foreign record fits in between).
Otherwise something else wrote into the range (another producer, a transaction marker): the chunk is
mapped by reading the range back and matching each record's provenance offset header; a chunk that
cannot be matched exactly fails the copy. A record cannot fail silently between two delivered ones:
with ``enable.gapless.guarantee`` a failed record makes the producer fatal, which fails every later
record, the chunk's last included (and a missing record would also break the offset count above).
Without provenance headers nothing could be matched, so every record is its own chunk (a report each).
"""

from __future__ import annotations

from collections import deque

from confluent_kafka import KafkaError

from kafka_ferry.copy.destination_tail import provenance_pairs
from kafka_ferry.core.common.failures import Retryable

MATCH_FAILED = "could not map its delivered records to destination offsets"


class CopyError(Retryable, RuntimeError):
    """A partition cannot be copied safely; the message says which and why."""


class Chunk:
    """Upstream offsets produced together, with the delivery outcome of the first and the last of them."""

    __slots__ = ("upstream", "first", "last", "error", "delivered")

    def __init__(self) -> None:
        self.upstream: list[int] = []
        self.first: int | None = None
        self.last: int | None = None
        self.error: KafkaError | None = None
        self.delivered = False

    def on_first(self, err, msg) -> None:
        if err is not None:
            self.error = self.error or err
        else:
            self.first = msg.offset()

    def on_last(self, err, msg) -> None:
        if err is not None:
            self.error = self.error or err
        else:
            self.last = msg.offset()
        self.delivered = True

    def on_only(self, err, msg) -> None:
        self.on_first(err, msg)
        self.on_last(err, msg)


class ChunkAcks:
    """Chunks awaiting delivery, oldest first; ``settle`` feeds delivered ones to the sync tracker in order."""

    def __init__(self, destination, topic: str, partition: int, source_cluster_id: str, tracker, emit,
                 on_acked=None) -> None:
        self.destination, self.topic, self.partition = destination, topic, partition
        self.source_cluster_id, self.tracker, self.emit = source_cluster_id, tracker, emit
        self.on_acked = on_acked  # called with (acked before, acked after) per chunk: crash tests hook in here
        self.pending: deque[Chunk] = deque()
        # The chunk being produced: not yet pending (it has no last report), but a produce() that raises
        # mid-chunk (the producer turned fatal) has sent some of its records, so a failure must count it.
        self.open: Chunk | None = None
        # the first failure; after it nothing is observed (the sync log must stay a prefix)
        self.error: KafkaError | None = None
        self.failed: Chunk | None = None  # the chunk that failed: its first record is the first one not copied
        self.acked = 0
        self.fallbacks = 0

    def settle(self) -> int:
        """Observe every delivered chunk at the head of the queue; returns how many records that acked."""
        settled = 0
        pending = self.pending
        while pending and pending[0].delivered and self.error is None:
            chunk = pending.popleft()
            if chunk.error is not None:
                self.error, self.failed = chunk.error, chunk
                break
            self._observe(chunk)
            settled += len(chunk.upstream)
            before, self.acked = self.acked, self.acked + len(chunk.upstream)
            if self.on_acked is not None:
                self.on_acked(before, self.acked)
        return settled

    def unacknowledged(self) -> list[Chunk]:
        """Every chunk not known to be copied, oldest first: the failed one, the pending ones, the open one."""
        chunks = ([self.failed] if self.failed else []) + list(self.pending)
        if self.open is not None and self.open.upstream and all(c is not self.open for c in chunks):
            chunks.append(self.open)
        return chunks

    def _observe(self, chunk: Chunk) -> None:
        ups, first, n = chunk.upstream, chunk.first, len(chunk.upstream)
        emit, tracker = self.emit, self.tracker
        if first is None or chunk.last is None:  # reports arrive in produce order: cannot happen, never guess
            raise CopyError(f"{self.topic}-{self.partition}: a chunk ended without both delivery reports")
        if chunk.last - first != n - 1:
            self.fallbacks += 1
            for up, down in self._read_back(chunk, first, chunk.last):
                emit(tracker.observe(up, down))
            return
        if ups[-1] - ups[0] == n - 1:  # the common case: one run, contiguous on both sides
            emit(tracker.observe_run(ups[0], first, n))
            return
        start = 0  # upstream holes (compaction, aborted transactions, loop guard): one run per stretch
        for i in range(1, n + 1):
            if i == n or ups[i] != ups[i - 1] + 1:
                emit(tracker.observe_run(ups[start], first + start, i - start))
                start = i

    def _read_back(self, chunk: Chunk, first: int, last: int) -> list[tuple[int, int]]:
        """Exact pairs of a chunk (downstream ``first``..``last``) that shares its offset range with foreign records,
        from provenance."""
        pairs = provenance_pairs(self.destination, self.topic, self.partition, first, last + 1,
                                 self.source_cluster_id)
        if [up for up, _ in pairs] != chunk.upstream:
            raise CopyError(f"{self.topic}-{self.partition}: offsets [{chunk.first}, {chunk.last}] hold foreign "
                            f"records and {MATCH_FAILED} (expected source offsets {chunk.upstream[0]}.."
                            f"{chunk.upstream[-1]}, found {len(pairs)} of ours)")
        return pairs
