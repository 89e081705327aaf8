"""An in-memory stand-in for the one cluster call the reconciliation makes (no Kafka): a hook whose
``consumer()`` serves fixed records per partition, in per-partition chunks, followed by an EOF event.

Only what ``kafka.reads.read_ranges`` calls is implemented: assign, consume, position,
incremental_unassign, close. Used by ``bench/scale.py``; it is a benchmark fixture, never a Kafka test.
"""

from __future__ import annotations

from collections import deque

from confluent_kafka import KafkaError, TopicPartition

CHUNK = 500  # records a fetch returns for one partition before another partition's turn


class _Eof:
    def code(self) -> int:
        return KafkaError._PARTITION_EOF


_EOF = _Eof()


class FakeMessage:
    __slots__ = ("_tp", "_offset", "_value", "_error")

    def __init__(self, topic: str, partition: int, offset: int, value: bytes | None, error=None) -> None:
        self._tp = (topic, partition)
        self._offset, self._value, self._error = offset, value, error

    def topic(self) -> str:
        return self._tp[0]

    def partition(self) -> int:
        return self._tp[1]

    def offset(self) -> int:
        return self._offset

    def error(self):
        return self._error

    def key(self) -> bytes:
        return b"k%d" % self._offset

    def value(self) -> bytes | None:
        return self._value

    def headers(self):
        return None

    def timestamp(self) -> tuple[int, int]:
        return 1, 1_700_000_000_000 + self._offset


class FakeConsumer:
    def __init__(self, logs: dict[tuple[str, int], int], counter: dict[str, int]) -> None:
        self._logs = logs  # (topic, partition) -> end offset; records are 0..end-1
        self._position: dict[tuple[str, int], int] = {}
        self._queue: deque[tuple[str, int]] = deque()
        self._assigned: set[tuple[str, int]] = set()
        self._counter = counter

    def assign(self, tps) -> None:
        for tp in tps:
            self._position[(tp.topic, tp.partition)] = tp.offset
            self._queue.append((tp.topic, tp.partition))
            self._assigned.add((tp.topic, tp.partition))

    def consume(self, num_messages: int = 1, timeout: float = -1):
        out: list[FakeMessage] = []
        while self._queue and len(out) < num_messages:
            tp = self._queue[0]
            if tp not in self._assigned:
                self._queue.popleft()
                continue
            pos, end = self._position[tp], self._logs[tp]
            take = min(CHUNK, end - pos, num_messages - len(out))
            out += [FakeMessage(tp[0], tp[1], o, b"v%d" % o) for o in range(pos, pos + take)]
            self._position[tp] = pos + take
            if self._position[tp] >= end and len(out) < num_messages:
                out.append(FakeMessage(tp[0], tp[1], end, None, _EOF))
                self._queue.popleft()
            elif take == CHUNK:
                self._queue.rotate(-1)
        return out

    def position(self, tps):
        self._counter["position_entries"] += len(tps)
        return [TopicPartition(tp.topic, tp.partition, self._position[(tp.topic, tp.partition)]) for tp in tps]

    def incremental_unassign(self, tps) -> None:
        self._assigned -= {(tp.topic, tp.partition) for tp in tps}

    def close(self) -> None:
        pass


class FakeClusterHook:
    """Partitions with ``end`` records each; counts the position entries the reader asks for."""

    def __init__(self, logs: dict[tuple[str, int], int]) -> None:
        self.logs = logs
        self.counter = {"position_entries": 0}

    def consumer(self, **_conf) -> FakeConsumer:
        return FakeConsumer(self.logs, self.counter)
