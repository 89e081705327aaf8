"""``state.store.MigrationStateStore`` on the in-memory cluster of ``tests/fakes``: the state topic it creates (and
the one it refuses), and what it reads back (newest value per key, tombstones, kinds a newer version wrote)."""

from __future__ import annotations

import logging

import pytest
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore

from kafka_ferry.core.common.state_records import FENCE_KIND, GROUP_KIND, PROGRESS_KIND, WRITTEN_AT, StateRecordError
from kafka_ferry.core.provisioning.provisioning_plan import ProvisioningRefused
from kafka_ferry.state.store import MigrationStateStore


def test_the_state_topic_is_one_compacted_partition_replicated_as_the_cluster_allows():
    small, big = FakeCluster("small", brokers=1), FakeCluster("big", brokers=5)
    assert MigrationStateStore(small, "s").ensure_topic() and MigrationStateStore(big, "s").ensure_topic()
    assert small.describe_topics(["s"])["s"].replication_factor == 1
    assert "min.insync.replicas" not in small.topics["s"].configs
    info = big.describe_topics(["s"])["s"]
    assert (info.partitions, info.replication_factor, info.configs["cleanup.policy"],
            info.configs["min.insync.replicas"]) == (1, 3, "compact", "2")
    assert MigrationStateStore(big, "s").ensure_topic() is False  # a retried run finds it


@pytest.mark.parametrize(("partitions", "policy"), [(3, "compact"), (1, "delete"), (1, "compact,delete")])
def test_an_existing_topic_of_another_shape_is_refused_before_anything_is_written(partitions, policy):
    cluster = FakeCluster("destination")
    cluster.create_topic("s", partitions, 1, {"cleanup.policy": policy})
    with pytest.raises(ProvisioningRefused, match="state topic s has"):
        MigrationStateStore(cluster, "s").ensure_topic()
    assert all(log.end == 0 for log in cluster.topics["s"].partitions)


def test_the_newest_value_wins_a_tombstone_deletes_and_an_undeclared_kind_is_left_out(caplog):
    store = FakeStateStore().created()
    store.put_many(FENCE_KIND, {"a": {"entries": [1]}, "b": {"entries": [1]}})
    store.put(FENCE_KIND, "a", {"entries": [2]})
    store.put(FENCE_KIND, "b", None)
    store.fake.produce_and_wait(store.topic, [(b"from-a-newer-version/x", b'{"y": 1}')], partition=0)
    with caplog.at_level(logging.WARNING):
        state = store.read_all()
    assert {k.name: v for k, v in state.items()} == {"fence": {"a": {"entries": [2], WRITTEN_AT: 1}}}
    assert "undeclared kinds ['from-a-newer-version']: left out" in caplog.text
    with pytest.raises(StateRecordError, match="key '' is not a non-empty string"):
        store.put(FENCE_KIND, "", {"entries": []})


def test_a_read_again_without_a_write_is_the_same_state_and_a_copy_each_caller_may_change():
    store = FakeStateStore().created()
    store.put_many(FENCE_KIND, {"a": {"entries": [1, {"deep": [2]}]}})
    store.put(GROUP_KIND, "g", {"source_topics": ["t"]})
    first = store.read_all()
    first[FENCE_KIND]["a"]["entries"][1]["deep"].append(3)  # a caller changes its copy, deep down
    first[GROUP_KIND].clear()
    again = store.read_all()
    assert {k.name: v for k, v in again.items()} == {"fence": {"a": {"entries": [1, {"deep": [2]}], WRITTEN_AT: 1}},
                                                     "group": {"g": {"source_topics": ["t"], WRITTEN_AT: 1}}}
    assert store.read_kind(GROUP_KIND) == {"g": {"source_topics": ["t"], WRITTEN_AT: 1}}
    assert store.read_kind(PROGRESS_KIND) == {}
    store.put(GROUP_KIND, "h", {"source_topics": ["u"]})  # a write moves the end: read from the topic again
    assert set(store.read_kind(GROUP_KIND)) == {"g", "h"}
