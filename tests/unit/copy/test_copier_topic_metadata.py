"""A lane's reused consumer asks for a topic's metadata once, before it is first assigned a partition of it
(librdkafka's consumer otherwise learns a new topic's leader only on its next 1 s metadata tick)."""

from __future__ import annotations

from fakes.cluster import FakeCluster

from kafka_ferry.copy.partition_copier import PartitionCopier
from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.copy.sync_writer import OffsetSyncWriter
from kafka_ferry.state.store import MigrationStateStore


def _copier(source: FakeCluster) -> PartitionCopier:
    plan = CopyPlan(migration="m", batch_id="b", source_cluster_id="s", destination_cluster_id="d",
                    state_topic="st", offset_syncs_topic="os", provenance_headers=True, offset_sync_interval=10,
                    max_records_per_partition=10, max_bytes_per_partition=10, tasks=())
    destination = FakeCluster("destination")  # the syncs and the state go there (these tests write neither)
    return PartitionCopier(plan, source, destination, sync_writer=OffsetSyncWriter(destination, "os"),
                           store=MigrationStateStore(destination, "st"))


def metadata_asked(source: FakeCluster) -> list[tuple]:
    return [r for r in source.requests if r[0] == "metadata"]


def test_each_topic_is_asked_for_once_whatever_the_partitions():
    source = FakeCluster("source")  # in memory (tests/fakes): its consumer records the metadata it asks for
    copier = _copier(source)
    for topic in ("orders", "orders", "payments", "orders", "payments", "refunds"):
        copier._learn_topic(topic)
    calls = metadata_asked(source)
    assert [c[1] for c in calls] == ["orders", "payments", "refunds"]
    assert all(c[2] > 0 for c in calls)  # bounded: never the default of waiting forever


def test_a_failed_ask_does_not_fail_the_copy_and_is_not_repeated():
    source = FakeCluster("source")
    source.slow_metadata.add("slow")  # the broker does not answer for it in time
    copier = _copier(source)
    copier._learn_topic("slow")
    copier._learn_topic("slow")
    assert [c[1] for c in metadata_asked(source)] == ["slow"]
