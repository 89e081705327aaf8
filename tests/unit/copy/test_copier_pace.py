"""The copy loop under a rate limit and a deadline, on fake clients and a fake clock: throttling only delays (the
same records, in the same order, at the same destination offsets), and a deadline ends the range at a chunk
boundary with everything before it produced and acknowledged."""

from __future__ import annotations

from collections.abc import Callable

from fakes.cluster import FakeCluster
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kafka_ferry.copy.partition_copier import PartitionCopier
from kafka_ferry.copy.plan import CopyPlan, PartitionTask
from kafka_ferry.copy.report import PartitionResult
from kafka_ferry.copy.sync_writer import OffsetSyncWriter
from kafka_ferry.copy.throttle import BatchPace
from kafka_ferry.core.batches.rate_limit import RateLimit
from kafka_ferry.core.offsets.offset_sync_policy import PartitionSyncTracker, SyncPoint
from kafka_ferry.state.store import MigrationStateStore

TOPIC, RECORDS = "orders", 400


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Message:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def error(self):
        return None

    def topic(self):
        return TOPIC

    def partition(self):
        return 0

    def offset(self):
        return self._offset

    def headers(self):
        return [("h", b"%d" % self._offset)]

    def key(self):
        return b"k%d" % self._offset

    def value(self):
        return b"v" * (self._offset % 50)

    def timestamp(self):
        return (1, self._offset)


class Consumer:
    """The source partition: each consume() returns up to n records from the position, taking a little time."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.position_at = clock, 0

    def list_topics(self, topic=None, timeout=-1):
        return None

    def assign(self, partitions):
        self.position_at = partitions[0].offset

    def consume(self, n, timeout):
        self.clock.now += 0.001
        batch = [Message(o) for o in range(self.position_at, min(RECORDS, self.position_at + n))]
        self.position_at += len(batch)
        return batch

    def position(self, partitions):
        return [type("TP", (), {"offset": self.position_at})()]


class Producer:
    """The destination partition: appends in produce order, reports deliveries on poll/flush (time passes)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.log: list[tuple[bytes | None, bytes | None, int]] = []  # (key, value, timestamp)
        self.reports: list[tuple[Callable[..., object], int]] = []  # (on_delivery, offset)

    def produce(self, topic, value, key, partition, on_delivery=None, timestamp=0, headers=None):
        self.log.append((key, value, timestamp))
        if on_delivery is not None:
            self.reports.append((on_delivery, len(self.log) - 1))

    def poll(self, timeout=0):
        self.clock.now += timeout
        reports, self.reports = self.reports, []
        for callback, offset in reports:
            callback(None, type("M", (), {"offset": lambda self, o=offset: o})())
        return len(reports)

    def flush(self, timeout=0):
        self.poll(0)
        return 0


class Cluster:
    def __init__(self, client) -> None:
        self.client = client

    def consumer(self, **config):
        return self.client

    def producer(self, **config):
        return self.client


def copy(limit: RateLimit, deadline_s: float | None = None):
    clock = Clock()
    plan = CopyPlan(migration="m", batch_id="b", source_cluster_id="s", destination_cluster_id="d",
                    state_topic="st", offset_syncs_topic="os", provenance_headers=True, offset_sync_interval=10,
                    max_records_per_partition=10**6, max_bytes_per_partition=10**9,
                    tasks=(PartitionTask(TOPIC, 0, TOPIC, 0, RECORDS),))
    pace = BatchPace(limit, None if deadline_s is None else int((clock.now + deadline_s) * 1000), clock=clock,
                     wall=clock)
    producer = Producer(clock)
    state = FakeCluster("destination")  # where syncs and progress would go (a range's copy writes neither)
    writer, store = OffsetSyncWriter(state, "os"), MigrationStateStore(state, "st")
    copier = PartitionCopier(plan, Cluster(Consumer(clock)), Cluster(producer), sync_writer=writer, store=store,
                             pace=pace)
    syncs: list[SyncPoint] = []
    tracker = PartitionSyncTracker(10)
    result = PartitionResult(TOPIC, 0, TOPIC, 0, RECORDS, 0, 0)
    started = clock.now
    copier._copy_range(plan.tasks[0], 0, tracker, syncs.extend, result)
    syncs.extend(tracker.finish())
    return producer.log, result, syncs, clock.now - started


UNLIMITED = copy(RateLimit())


@settings(max_examples=30, deadline=None)
@given(records_per_s=st.one_of(st.none(), st.integers(20, 5000)), bytes_per_s=st.one_of(st.none(),
                                                                                         st.integers(500, 100_000)))
def test_a_limit_only_delays_the_same_copy(records_per_s, bytes_per_s):
    limit = RateLimit(bytes_per_s, records_per_s)
    log, result, syncs, elapsed = copy(limit)
    assert log == UNLIMITED[0]  # same records, same order, same destination offsets
    assert syncs == UNLIMITED[2] and result.next_upstream_offset == RECORDS and not result.stopped_at_deadline
    # the limit held, to within one chunk (a quarter second of it; a byte limit's first: 100 records) and the burst
    if records_per_s is not None:
        assert RECORDS <= records_per_s * (elapsed + 0.35) + 1
    if bytes_per_s is not None:
        assert result.bytes_copied <= bytes_per_s * (elapsed + 0.35) + 100 * 60
    if records_per_s is not None and records_per_s * 0.25 < RECORDS / 2:  # more than one chunk: it waited
        assert result.throttled_s > 0


@settings(max_examples=30, deadline=None)
@given(records_per_s=st.integers(20, 400), deadline_s=st.floats(0.01, 0.9))
def test_a_deadline_ends_the_range_at_a_chunk_boundary_with_everything_before_it_acknowledged(records_per_s,
                                                                                              deadline_s):
    # only where the limit cannot let the whole range through before the deadline: within the slack the limit is
    # allowed (one chunk ahead, as the test above bounds it) a fast enough copy legitimately finishes first
    assume(records_per_s * (deadline_s + 0.35) + 1 < RECORDS)
    log, result, syncs, _ = copy(RateLimit(records_per_second=records_per_s), deadline_s)
    copied = result.next_upstream_offset
    assert result.stopped_at_deadline and 0 < copied < RECORDS
    assert log == UNLIMITED[0][:copied]  # a prefix, nothing half done
    assert result.records_copied == copied
    assert syncs[-1].upstream_offset == copied - 1 and syncs[-1].downstream_offset == copied - 1
