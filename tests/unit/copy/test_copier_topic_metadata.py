"""A lane's reused consumer asks for a topic's metadata once, before it is first assigned a partition of it
(librdkafka's consumer otherwise learns a new topic's leader only on its next 1 s metadata tick)."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from kafka_ferry.copy.partition_copier import PartitionCopier
from kafka_ferry.copy.plan import CopyPlan


class _Consumer:
    def __init__(self, calls: list, fail: set[str]) -> None:
        self.calls, self.fail = calls, fail

    def list_topics(self, topic=None, timeout=-1):
        self.calls.append(("metadata", topic, timeout))
        if topic in self.fail:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no metadata in time"))


class _Cluster:
    def __init__(self, consumer=None) -> None:
        self._consumer = consumer

    def consumer(self, **config):
        return self._consumer

    def producer(self, **config):
        return object()


def _copier(calls: list, fail: set[str] = frozenset()) -> PartitionCopier:
    plan = CopyPlan(migration="m", batch_id="b", source_cluster_id="s", destination_cluster_id="d",
                    state_topic="st", offset_syncs_topic="os", provenance_headers=True, offset_sync_interval=10,
                    max_records_per_partition=10, max_bytes_per_partition=10, tasks=())
    return PartitionCopier(plan, _Cluster(_Consumer(calls, set(fail))), _Cluster(), sync_writer=None, store=None)


def test_each_topic_is_asked_for_once_whatever_the_partitions():
    calls: list = []
    copier = _copier(calls)
    for topic in ("orders", "orders", "payments", "orders", "payments", "refunds"):
        copier._learn_topic(topic)
    assert [c[1] for c in calls] == ["orders", "payments", "refunds"]
    assert all(c[0] == "metadata" and c[2] > 0 for c in calls)  # bounded: never the default of waiting forever


def test_a_failed_ask_does_not_fail_the_copy_and_is_not_repeated():
    calls: list = []
    copier = _copier(calls, fail={"slow"})
    copier._learn_topic("slow")
    copier._learn_topic("slow")
    assert [c[1] for c in calls] == ["slow"]
