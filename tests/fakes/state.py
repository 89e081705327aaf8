"""The migration's state store for unit tests: the real ``MigrationStateStore`` over the in-memory ``FakeCluster``.

Nothing of the store is replaced: records go through the kind's declaration and encoding, the read applies the
newest value per key and tombstones, exactly as on Kafka; only the brokers are in memory. ``log`` shows the state
topic's records as written (a test asserting "nothing was written" compares it before and after).
"""

from __future__ import annotations

from fakes.cluster import FakeCluster
from kafka_ferry.state.store import MigrationStateStore

STATE_TOPIC = "kafka-ferry.test.state"


class FakeStateStore(MigrationStateStore):
    """A ``MigrationStateStore`` on a ``FakeCluster`` (its own, or the test's destination), state topic created."""

    def __init__(self, cluster: FakeCluster | None = None, topic: str = STATE_TOPIC, now_ms: int = 1) -> None:
        """``now_ms``: the write time stamped on every record (fixed, so a test can compare records whole)."""
        self.fake = cluster or FakeCluster("destination")
        super().__init__(self.fake, topic, clock=lambda: now_ms / 1000)

    @property
    def log(self) -> list[tuple[bytes | None, bytes | None]]:
        """The state topic's records (key, value) in offset order; empty when the topic does not exist."""
        topic = self.fake.topics.get(self.topic)
        return [] if topic is None else [(k, v) for k, v, *_ in topic.partitions[0].records]

    def created(self) -> FakeStateStore:
        self.ensure_topic()
        return self
