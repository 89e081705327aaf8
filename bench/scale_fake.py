"""The 10k-partition scale bench's cluster: the tests' in-memory ``FakeCluster`` (``tests/fakes/cluster.py``) with
synthetic logs, so the bench and the unit tests share one fake whose behaviour a contract test checks against Kafka.

Each partition holds ``end`` records made on demand (key ``k<offset>``, value ``v<offset>``, one timestamp per
offset), read through the fake's consumer in per-partition chunks followed by an EOF event; the consumer counts
the position entries the reader asks for. Used by ``bench/scale.py``; it is a benchmark fixture, never a Kafka test.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fakes.cluster import FakeCluster, SyntheticLog  # noqa: E402


class FakeClusterHook(FakeCluster):
    """Partitions with ``end`` records each; ``counter["position_entries"]`` counts the positions asked."""

    def __init__(self, logs: dict[tuple[str, int], int]) -> None:
        super().__init__("scale-bench")
        by_topic: dict[str, dict[int, int]] = defaultdict(dict)
        for (topic, partition), end in logs.items():
            by_topic[topic][partition] = end
        for topic, sizes in by_topic.items():
            self.add_log(topic, [SyntheticLog(sizes.get(p, 0)) for p in range(max(sizes) + 1)])
        self.counter = self.calls
