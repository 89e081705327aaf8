"""read_ranges' polling loop over a scripted consumer: what it yields, when it stops, and how many
positions it asks for. (What real brokers deliver is covered by the integration tests that read ranges.)"""

from __future__ import annotations

from confluent_kafka import KafkaError, TopicPartition

from kafka_ferry.kafka.reads import read_ranges


class _Eof:
    def code(self) -> int:
        return KafkaError._PARTITION_EOF


class _Msg:
    def __init__(self, tp, offset, error=None):
        self.tp, self.off, self.err = tp, offset, error

    def topic(self):
        return self.tp[0]

    def partition(self):
        return self.tp[1]

    def offset(self):
        return self.off

    def error(self):
        return self.err


class _Consumer:
    """Delivers each partition's offsets in chunks, round robin; ``silent_tail`` partitions move their
    position past their last record without any event (as skipped transaction markers do), and never EOF."""

    def __init__(self, ends, chunk, silent_tail=()):
        self.ends, self.chunk, self.silent_tail = ends, chunk, set(silent_tail)
        self.pos, self.order, self.position_entries, self.closed = {}, [], 0, False

    def assign(self, tps):
        for tp in tps:
            self.pos[(tp.topic, tp.partition)] = tp.offset
            self.order.append((tp.topic, tp.partition))

    def consume(self, num_messages, timeout):
        out: list[_Msg] = []
        for tp in list(self.order):
            if len(out) >= num_messages:
                break
            end = self.ends[tp] - (1 if tp in self.silent_tail else 0)
            take = min(self.chunk, end - self.pos[tp], num_messages - len(out))
            out += [_Msg(tp, o) for o in range(self.pos[tp], self.pos[tp] + take)]
            self.pos[tp] += take
            if self.pos[tp] >= end:
                self.order.remove(tp)
                if tp in self.silent_tail:
                    self.pos[tp] = self.ends[tp]  # the marker is skipped: no event
                else:
                    out.append(_Msg(tp, end, _Eof()))
        return out

    def position(self, tps):
        self.position_entries += len(tps)
        return [TopicPartition(tp.topic, tp.partition, self.pos[(tp.topic, tp.partition)]) for tp in tps]

    def incremental_unassign(self, tps):
        for tp in tps:
            key = (tp.topic, tp.partition)
            if key in self.order:
                self.order.remove(key)

    def close(self):
        self.closed = True


class _Hook:
    name = "destination"  # what a read error names

    def __init__(self, consumer):
        self._consumer = consumer

    def consumer(self, **_conf):
        return self._consumer


def _read(consumer, ranges):
    return [(m.topic(), m.partition(), m.offset()) for m in read_ranges(_Hook(consumer), ranges, timeout_s=30)]


def test_yields_every_offset_of_every_range_and_stops():
    ends = {("a", p): 40 for p in range(6)}
    consumer = _Consumer(ends, chunk=7)
    ranges = {("a", 0): (0, 40), ("a", 1): (5, 12), ("a", 2): (39, 40), ("a", 3): (0, 0), ("a", 4): (10, 40)}
    got = _read(consumer, ranges)
    want = sorted((t, p, o) for (t, p), (s, e) in ranges.items() for o in range(s, e))
    assert sorted(got) == want
    assert consumer.closed


def test_partition_that_ends_without_an_event_is_still_dropped():
    # Its position passes the range end through a skipped marker; only a full re-check on an idle poll sees it.
    ends = {("m", 0): 10, ("m", 1): 10}
    consumer = _Consumer(ends, chunk=3, silent_tail={("m", 1)})
    got = _read(consumer, {("m", 0): (0, 10), ("m", 1): (0, 10)})
    assert sorted(got) == [("m", 0, o) for o in range(10)] + [("m", 1, o) for o in range(9)]


def test_positions_asked_grow_linearly_with_partitions():
    def entries(partitions: int) -> int:
        ends = {("s", p): 10 for p in range(partitions)}
        consumer = _Consumer(ends, chunk=500)
        assert len(_read(consumer, {tp: (0, 10) for tp in ends})) == 10 * partitions
        return consumer.position_entries

    small, large = entries(200), entries(2000)
    # Each partition is checked after the polls that delivered for it (and once per idle poll): about one
    # check per partition, not one per partition per poll (which gave ~(records / 1000) x partitions).
    assert large <= 2 * 2000
    assert large <= 11 * small
