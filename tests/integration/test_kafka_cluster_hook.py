"""The cluster hook against the real brokers: offsets, groups, and errors a person can act on."""

from __future__ import annotations

import json
import os

import pytest

from kafka_ferry.hooks.kafka_cluster import kafka_cluster
from kafka_ferry.kafka.errors import KafkaClusterError

pytestmark = pytest.mark.integration


def test_offsets_and_group_offsets_round_trip(clusters):
    # Kept forever: the records' 1970 timestamps are past the broker's 7-day retention, whose check (every second
    # on the test bed) deleted them under the test at times (earliest offset 3 = the end).
    topic = clusters.create_topic("source", clusters.unique("hook"), 2, config={"retention.ms": "-1"})
    producer = clusters.producer("source")
    for i in range(7):
        producer.produce(topic, value=str(i).encode(), partition=i % 2, timestamp=1_000_000 + i * 1000)
    producer.flush(30)
    hook = clusters.cluster("source")

    partitions = hook.partitions_of([topic])
    assert partitions == [(topic, 0), (topic, 1)]
    assert hook.list_offsets(partitions, "earliest") == {(topic, 0): 0, (topic, 1): 0}
    assert hook.list_offsets(partitions, "latest") == {(topic, 0): 4, (topic, 1): 3}
    # by time: the first record at or after the timestamp (record 4 -> partition 0 offset 2)
    assert hook.list_offsets([(topic, 0)], "time", timestamp_ms=1_004_000) == {(topic, 0): 2}

    group = clusters.unique("hook-group")
    hook.alter_group_offsets(group, {(topic, 0): 3, (topic, 1): 1}, metadata={(topic, 0): "from-test"})
    assert hook.group_offsets(group) == {(topic, 0): 3, (topic, 1): 1}
    assert hook.group_offsets_with_metadata(group)[(topic, 0)] == (3, "from-test")
    assert group in hook.list_group_ids()
    info = hook.describe_groups([group])[group]
    assert info.member_count == 0 and not info.is_active


def test_many_groups_are_read_together_as_each_alone(clusters):
    """``groups_offsets``: one OffsetFetch for all groups (``kafka.offset_fetch``; the client's path, one request per
    group, is held to the same answer in test_batched_offset_fetch.py), answering as the one-group read does (a
    group that never committed has none; metadata kept); a missing topic has no partitions."""
    from kafka_ferry.kafka import call_count

    topic = clusters.create_topic("source", clusters.unique("hook-many"), 3)
    hook = clusters.cluster("source")
    assert hook.partitions_of([topic, clusters.unique("missing")]) == [(topic, 0), (topic, 1), (topic, 2)]
    groups = [clusters.unique(f"hook-many-g{i}") for i in range(5)]
    for i, group in enumerate(groups[:4]):
        hook.alter_group_offsets(group, {(topic, q): i + q for q in range(i % 3 + 1)},
                                 metadata={(topic, 0): f"m{i}"})
    before = call_count.snapshot()
    together = hook.groups_offsets_with_metadata(groups)
    assert call_count.since(before) == {"wire.ApiVersions": 1, "wire.FindCoordinator": 1, "wire.OffsetFetch": 1}
    assert together == {g: hook.group_offsets_with_metadata(g) for g in groups}
    assert together == hook._groups_offsets_one_per_request(sorted(groups))
    assert together[groups[2]] == {(topic, 0): (2, "m2"), (topic, 1): (3, ""), (topic, 2): (4, "")}
    assert together[groups[4]] == {}
    assert hook.groups_offsets(groups[:2]) == {groups[0]: {(topic, 0): 0}, groups[1]: {(topic, 0): 1, (topic, 1): 2}}


def test_many_topics_are_created_in_one_request_an_existing_one_reported_not_recreated(clusters):
    from kafka_ferry.kafka import call_count

    existing = clusters.create_topic("destination", clusters.unique("hook-exists"), 1)
    new = [clusters.unique(f"hook-new{i}") for i in range(3)]
    hook = clusters.cluster("destination")
    hook.list_topic_names()  # the admin client exists before the count
    before = call_count.snapshot()
    created = hook.create_topics([(n, 2, 1, {"cleanup.policy": "compact"}) for n in new]
                                 + [(existing, 1, 1, {})])
    assert created == {**{n: True for n in new}, existing: False}
    assert call_count.since(before).get("admin.create_topics") == 1
    described = hook.describe_topics(new)
    assert {n: (i.partitions, i.configs["cleanup.policy"]) for n, i in described.items()} == \
        {n: (2, "compact") for n in new}
    assert hook.list_offsets([(n, q) for n in new for q in range(2)]) == {(n, q): 0 for n in new for q in range(2)}

    from kafka_ferry.kafka.acls import authorized_operations

    before = call_count.snapshot()
    assert set(authorized_operations(hook, "TOPIC", [*new, clusters.unique("missing")])) == set(new)
    assert call_count.since(before) == {"admin.list_topics": 1, "admin.describe_topics": 1}  # not one per topic


def test_unreachable_cluster_error_names_connection_and_hides_secrets(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KF_TEST_DEAD", json.dumps({"conn_type": "kafka", "extra": {
        "bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "ferry", "sasl.password": "hunter2-secret"}}))
    hook = kafka_cluster("kf_test_dead")
    hook.request_timeout_s = 3
    with pytest.raises(KafkaClusterError) as raised:
        hook.describe_cluster()
    message = str(raised.value)
    # librdkafka's own request timeout or the hook's wait ends first, whichever the scheduler favours; the
    # hook's wait adds librdkafka's last connection error (connection refused, brokers down) when it has one
    prefix = "Kafka connection 'kf_test_dead' (bootstrap servers 127.0.0.1:1): describe cluster failed: "
    suffix = " (the cluster did not answer in time: check bootstrap.servers and that brokers are up)"
    assert message.startswith(prefix) and message.endswith(suffix), message
    reason = message[len(prefix):-len(suffix)]
    assert reason in ("Failed while waiting for controller: Local: Timed out", "no answer within 3 s") or (
        reason.startswith("no answer within 3 s; last client error: ")), reason
    assert not raised.value.permanent  # an unreachable cluster may come back: the task keeps its retries
    assert "hunter2" not in message and "hunter2" not in repr(raised.value)


def test_missing_bootstrap_servers_is_refused(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KF_TEST_EMPTY", json.dumps({"conn_type": "kafka", "extra": {}}))
    with pytest.raises(ValueError, match="bootstrap.servers"):
        kafka_cluster("kf_test_empty").describe_cluster()
    assert os.environ["AIRFLOW_CONN_KF_TEST_EMPTY"]
