"""Helpers of the staged cutover tests: an in-process copy engine and a producer that keeps writing."""

from __future__ import annotations

import threading

PARTITIONS = 2


def thread_copy(plan, configs) -> list[dict]:
    from kafka_ferry.copy.runner import copy_group

    return copy_group(plan, list(plan.tasks), configs)


class Writer:
    """Writes to the source until stopped; counts what it wrote per partition."""

    def __init__(self, clusters, topic: str):
        self.producer = clusters.cluster("source").producer(**{"acks": "all", "enable.idempotence": True})
        self.topic, self.stop, self.written = topic, threading.Event(), 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            for p in range(PARTITIONS):
                self.producer.produce(self.topic, value=f"live-{self.written}".encode(), partition=p)
            self.written += 1
            self.producer.poll(0)
            self.stop.wait(0.01)
        assert self.producer.flush(30) == 0

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(60)
