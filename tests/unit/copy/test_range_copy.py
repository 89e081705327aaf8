"""The named steps of a partition's copy loop (``copy.range_copy``): chunking, caps, the stall watch."""

from __future__ import annotations

import pytest

from kafka_ferry.copy.copier_settings import CONSUME_BATCH, STALL_TIMEOUT_S
from kafka_ferry.copy.delivery import Chunk, CopyError
from kafka_ferry.copy.plan import PartitionTask
from kafka_ferry.copy.range_copy import ChunkProducer, RangeCursor, StallWatch


class Acks:
    def __init__(self):
        self.pending: list[Chunk] = []
        self.open: Chunk | None = None
        self.settled = 0

    def settle(self):
        self.settled += 1


class Produced:
    """A fake ``produce``: records every call; ``full`` makes the next n calls raise BufferError."""

    def __init__(self, full: int = 0):
        self.calls: list[tuple[bytes | None, object]] = []  # (value, on_delivery)
        self.full, self.polls = full, 0

    def produce(self, topic, value, key, partition, on_delivery=None, timestamp=0, headers=None):
        if self.full:
            self.full -= 1
            raise BufferError("queue full")
        self.calls.append((value, on_delivery))

    def poll(self, timeout):
        self.polls += 1


def record(n: int):
    return (b"k%d" % n, b"v%d" % n, None, n)


def reports(produced: Produced, chunk) -> list[str]:
    names: dict[object, str] = {None: "none"}
    for name in ("on_first", "on_last", "on_only"):
        names[getattr(chunk, name)] = name
    return [names.get(cb, "other") for _, cb in produced.calls]


def batch(producer: ChunkProducer, offsets):
    producer.open_chunk()
    for offset in offsets:
        producer.release_held()
        producer.hold(offset, record(offset))
    producer.close_chunk()


def test_a_batch_is_one_chunk_first_and_last_records_carry_the_reports():
    produced, acks = Produced(), Acks()
    producer = ChunkProducer(produced.produce, produced.poll, acks, "t", 0, per_record=False)
    batch(producer, [5, 6, 7, 8])
    chunk = producer.chunk
    assert chunk.upstream == [5, 6, 7, 8] and acks.pending == [chunk] and acks.open is chunk
    assert [v for v, _ in produced.calls] == [b"v5", b"v6", b"v7", b"v8"]  # in order, each once
    assert reports(produced, chunk) == ["on_first", "none", "none", "on_last"]


def test_a_one_record_batch_gets_the_only_report_and_an_empty_batch_no_chunk():
    produced, acks = Produced(), Acks()
    producer = ChunkProducer(produced.produce, produced.poll, acks, "t", 0, per_record=False)
    batch(producer, [])
    assert acks.pending == [] and produced.calls == []
    batch(producer, [3])
    assert reports(produced, producer.chunk) == ["on_only"] and acks.pending == [producer.chunk]


def test_without_provenance_every_record_is_its_own_chunk():
    produced, acks = Produced(), Acks()
    producer = ChunkProducer(produced.produce, produced.poll, acks, "t", 0, per_record=True)
    batch(producer, [1, 2, 3])
    assert [c.upstream for c in acks.pending] == [[1], [2], [3]]
    assert [cb for _, cb in produced.calls] == [c.on_only for c in acks.pending]


def test_a_full_local_queue_serves_reports_and_retries_without_losing_or_reordering():
    produced, acks = Produced(full=3), Acks()
    producer = ChunkProducer(produced.produce, produced.poll, acks, "t", 0, per_record=False)
    batch(producer, [1, 2, 3])
    assert [v for v, _ in produced.calls] == [b"v1", b"v2", b"v3"]
    assert reports(produced, producer.chunk) == ["on_first", "none", "on_last"]
    assert produced.polls == acks.settled >= 2


def test_the_cursor_asks_only_for_what_is_left_and_stops_at_a_cap_before_the_end():
    cursor = RangeCursor(start=10, end=10 + CONSUME_BATCH + 3, max_records=2, max_bytes=10**9)
    assert cursor.batch_size() == CONSUME_BATCH
    cursor.next_offset = cursor.end - 3
    assert cursor.batch_size() == 3
    cursor.next_offset = 11
    assert not cursor.count(b"k", b"v")
    cursor.next_offset = 12
    assert cursor.count(b"k", None) and cursor.capped and cursor.done
    assert (cursor.copied, cursor.copied_bytes) == (2, 3)


def test_a_cap_reached_on_the_last_planned_record_is_no_cap():
    cursor = RangeCursor(start=0, end=2, max_records=2, max_bytes=10**9)
    cursor.next_offset = 1
    cursor.count(None, b"x")
    cursor.next_offset = 2
    assert not cursor.count(None, b"x") and not cursor.capped
    cursor.position_moved(2)
    assert cursor.done and cursor.next_offset == 2


class Clock:
    """A monotonic clock the test moves by hand (``now[0] += s``): a stall's time passes without waiting it."""

    def __init__(self, now: list[float]) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now[0]


def test_the_stall_watch_fails_a_range_that_neither_reads_nor_moves():
    now = [1000.0]
    task = PartitionTask("src", 3, "dst", 40, 90)
    cursor = RangeCursor(40, 90, 10**9, 10**9)
    watch = StallWatch(40, clock=Clock(now))
    now[0] += STALL_TIMEOUT_S + 1
    watch.check(task, False, cursor, 45)  # the position moved (aborted records skipped): not a stall
    now[0] += STALL_TIMEOUT_S / 2
    watch.check(task, True, cursor, 45)  # records came back
    now[0] += STALL_TIMEOUT_S + 1
    cursor.next_offset = 45
    with pytest.raises(CopyError, match=r"src-3: no record for .* at offset 45, planned end 90"):
        watch.check(task, False, cursor, 45)
    cursor.reached_end()
    watch.check(task, False, cursor, None)  # a finished range never stalls
