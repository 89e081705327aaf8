"""ChunkAcks: exact destination offsets from two reports per chunk, read-back when foreign records interleave.

The read-back reads the destination partition of the in-memory cluster of ``tests/fakes``, written as the copy and
another producer would have written it (our records carry provenance headers, the foreign ones none)."""

from __future__ import annotations

import pytest
from fakes.cluster import FakeCluster
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.copy.delivery import Chunk, ChunkAcks, CopyError
from kafka_ferry.core.offsets.offset_sync_policy import PartitionSyncTracker, SyncPoint
from kafka_ferry.core.offsets.provenance import provenance_headers


class Msg:
    def __init__(self, offset):
        self._offset = offset

    def offset(self):
        return self._offset


def deliver(chunk: Chunk, downs: list[int]) -> None:
    if len(downs) == 1:
        chunk.on_only(None, Msg(downs[0]))
    else:
        chunk.on_first(None, Msg(downs[0]))
        chunk.on_last(None, Msg(downs[-1]))


def make(interval=3, written: dict[int, int] | None = None):
    """ChunkAcks onto a destination partition t-0 whose offsets 0..max hold our records where ``written`` maps a
    downstream offset to its upstream one, and another producer's records everywhere else."""
    emitted: list[SyncPoint] = []
    tracker = PartitionSyncTracker(interval)
    destination = FakeCluster("destination")
    destination.create_topic("t", 1, 1, {})
    written = written or {}
    destination.produce("t", 0, *((b"k", b"v", provenance_headers("src", written[d]) if d in written else None)
                                  for d in range(max(written, default=-1) + 1)))
    acks = ChunkAcks(destination, "t", 0, "src", tracker, emitted.extend)
    return acks, tracker, emitted


@st.composite
def chunks(draw):
    """Chunks of upstream offsets (with holes) and their destination offsets (foreign records sometimes between)."""
    up, down, out = draw(st.integers(0, 50)), draw(st.integers(0, 50)), []
    for _ in range(draw(st.integers(1, 5))):
        ups, downs = [], []
        for _ in range(draw(st.integers(1, 12))):
            up += draw(st.sampled_from([1, 1, 1, 2, 5]))
            down += draw(st.sampled_from([1, 1, 1, 1, 3]))
            ups.append(up)
            downs.append(down)
        out.append((ups, downs))
    return out


@given(chunks(), st.integers(1, 6))
def test_same_syncs_as_per_record_observe(drawn_chunks, interval):
    acks, tracker, emitted = make(interval, {d: u for ups, downs in drawn_chunks
                                             for u, d in zip(ups, downs, strict=True)})
    reference = PartitionSyncTracker(interval)
    expected = []
    for ups, downs in drawn_chunks:
        chunk = Chunk()
        chunk.upstream.extend(ups)
        deliver(chunk, downs)
        acks.pending.append(chunk)
        for pair in zip(ups, downs, strict=True):
            expected.extend(reference.observe(*pair))
    acks.settle()
    assert emitted == expected
    assert acks.acked == sum(len(u) for u, _ in drawn_chunks) and not acks.pending
    assert tracker.finish() == reference.finish()


def test_foreign_records_are_read_back_and_must_match():
    acks, _, _ = make(written={0: 10, 3: 12})  # one of ours missing: offsets 1 and 2 hold foreign records
    chunk = Chunk()
    chunk.upstream.extend([10, 11, 12])
    deliver(chunk, [0, 3])  # 4 offsets for 3 records: someone else wrote in between
    acks.pending.append(chunk)
    with pytest.raises(CopyError, match="could not map"):
        acks.settle()


def test_an_error_stops_observing():
    acks, _, emitted = make()
    good, bad, later = Chunk(), Chunk(), Chunk()
    for c, ups in ((good, [1, 2]), (bad, [3, 4]), (later, [5, 6])):
        c.upstream.extend(ups)
        acks.pending.append(c)
    deliver(good, [0, 1])
    bad.on_first(None, Msg(2))
    bad.on_last("boom", None)
    deliver(later, [4, 5])
    acks.settle()
    assert acks.error == "boom" and acks.acked == 2 and emitted == [(1, 0)]
    acks.settle()
    assert acks.acked == 2


def test_undelivered_chunks_wait():
    acks, _, emitted = make()
    chunk = Chunk()
    chunk.upstream.extend([1, 2])
    chunk.on_first(None, Msg(0))
    acks.pending.append(chunk)
    assert acks.settle() == 0 and emitted == [] and acks.pending


def test_a_chunk_still_being_produced_counts_as_unacknowledged():
    """produce() raising mid-chunk (the producer turned fatal) leaves the open chunk out of `pending`; a failure
    must still name its records, or the first record not copied goes unnamed."""
    acks, _, _ = make()
    done, open_ = Chunk(), Chunk()
    done.upstream.extend([1, 2])
    acks.pending.append(done)
    deliver(done, [0, 1])
    acks.settle()
    acks.open = open_
    assert acks.unacknowledged() == []  # nothing produced in the open chunk yet
    open_.upstream.extend([3, 4, 5])
    assert acks.unacknowledged() == [open_]


def test_the_unacknowledged_chunks_are_the_failed_then_pending_then_open_each_once():
    acks, _, _ = make()
    bad, waiting = Chunk(), Chunk()
    for c, ups in ((bad, [1, 2]), (waiting, [3, 4])):
        c.upstream.extend(ups)
        acks.pending.append(c)
    bad.on_first(None, Msg(0))
    bad.on_last("boom", None)
    acks.settle()
    acks.open = waiting  # the open chunk was appended already: listed once
    assert acks.unacknowledged() == [bad, waiting]
    later = Chunk()
    later.upstream.append(5)
    acks.open = later
    assert acks.unacknowledged() == [bad, waiting, later]
