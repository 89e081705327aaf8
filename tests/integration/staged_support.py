"""Helpers of the staged cutover tests: an in-process copy engine, a producer that keeps writing, a tenant consumer
that processes each record once, one catch-up batch."""

from __future__ import annotations

import threading
import time

PARTITIONS = 2


def thread_copy(plan, configs) -> list[dict]:
    from kafka_ferry.copy.runner import copy_group

    return copy_group(plan, list(plan.tasks), configs)


class Writer:
    """Writes to the source until stopped; counts what it wrote per partition."""

    def __init__(self, clusters, topic: str, partitions: int = PARTITIONS, interval_s: float = 0.01):
        self.producer = clusters.cluster("source").producer(**{"acks": "all", "enable.idempotence": True})
        self.topic, self.stop, self.written = topic, threading.Event(), 0
        self.partitions, self.interval_s = partitions, interval_s
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            for p in range(self.partitions):
                self.producer.produce(self.topic, value=f"live-{self.written}".encode(), partition=p)
            self.written += 1
            self.producer.poll(0)
            self.stop.wait(self.interval_s)
        assert self.producer.flush(30) == 0

    def wait_for_more(self, rounds: int, timeout_s: float = 30.0) -> None:
        """Return once the writer wrote `rounds` more rounds (one record per partition each)."""
        target, deadline = self.written + rounds, time.monotonic() + timeout_s
        while self.written < target:
            assert time.monotonic() < deadline, "the writer stalled"
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(60)


class Processor:
    """A tenant's consumer in one group: processes each record once (partition, value) and commits its offset
    right after, as an application that must not process a record twice does. Runs until stopped; `stop`
    closes the consumer, which leaves the group (its last commit is final)."""

    def __init__(self, cluster, group: str, topic: str, session_timeout_ms: int = 6000):
        self.consumer = cluster.consumer(**{"group.id": group, "enable.auto.commit": False,
                                            "auto.offset.reset": "earliest", "session.timeout.ms": session_timeout_ms})
        self.topic = topic
        self.processed: list[tuple[int | None, bytes | None]] = []
        self.errors: list[str] = []
        self.partitions_seen: set[int | None] = set()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        self.consumer.subscribe([self.topic])
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                self.errors.append(str(msg.error()))
                continue
            self.processed.append((msg.partition(), msg.value()))
            self.consumer.commit(message=msg, asynchronous=False)
            self.partitions_seen.add(msg.partition())
        self.consumer.close()

    def start(self) -> Processor:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), f"the consumer of {self.topic} did not stop"


def wait_until(condition, what: str, timeout_s: float = 120.0) -> None:
    """Return once ``condition()`` holds; fail naming ``what`` after ``timeout_s`` (a bound, not a timing check)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} (not within {timeout_s:.0f} s)"
        time.sleep(0.2)


def one_catch_up_batch(spec, source, destination, store) -> int:
    """One catch-up batch in this process, as a scheduled run copies it; the records it copied."""
    from kafka_ferry.copy.catch_up import copy_until

    looks = iter([False, True])  # run the first plan, stop at the second look
    return copy_until(spec, source, destination, store, thread_copy, "catch-up",
                      lambda plan: plan.is_empty or next(looks))["records_copied"]
