"""Provisioning against the real source (Kafka 3.9) and destination (Kafka 4.x) clusters."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException
from scenarios import provision, write_spec

from kafka_ferry.core.common.state_records import GROUP_KIND
from kafka_ferry.core.provisioning.provisioning_plan import ProvisioningRefused
from kafka_ferry.core.specs.spec import SpecError
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.operators.failures import is_deterministic
from kafka_ferry.operators.provision import (
    MigrationPreflightOperator,
    ProvisionMirrorGroupsOperator,
)
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration


def dest_topics(clusters, names):
    return clusters.cluster("destination").describe_topics(names)


def test_creates_matching_topics_and_a_second_run_changes_nothing(clusters, tmp_path):
    p = clusters.unique("prov")
    clusters.create_topic("source", f"{p}.plain", 3, {"retention.ms": "86400000", "compression.type": "lz4"})
    clusters.create_topic("source", f"{p}.compact", 2, {"cleanup.policy": "compact", "max.message.bytes": "2000000",
                                                        "min.insync.replicas": "2"})
    clusters.create_topic("source", f"{p}.skip", 1)
    spec_path = write_spec(tmp_path, clusters, p)

    first = provision(spec_path)

    made = dest_topics(clusters, [f"{p}.plain", f"{p}.compact", f"{p}.skip"])
    assert set(made) == {f"{p}.plain", f"{p}.compact"}
    assert made[f"{p}.plain"].partitions == 3
    assert made[f"{p}.plain"].configs["retention.ms"] == "86400000"
    assert made[f"{p}.plain"].configs["compression.type"] == "lz4"
    assert made[f"{p}.compact"].partitions == 2
    assert made[f"{p}.compact"].configs["cleanup.policy"] == "compact"
    assert made[f"{p}.compact"].configs["max.message.bytes"] == "2000000"
    # min.insync.replicas is capped to what a one-broker destination can hold
    assert made[f"{p}.compact"].configs["min.insync.replicas"] == "1"
    assert len(first["applied"]) == 2

    second = provision(spec_path)
    assert second["applied"] == []
    assert dest_topics(clusters, [f"{p}.plain", f"{p}.compact"]) == made


def test_prefix_rename_and_partition_growth(clusters, tmp_path):
    p = clusters.unique("grow")
    clusters.create_topic("source", f"{p}.orders", 2)
    spec_path = write_spec(tmp_path, clusters, p, topics={"include": [f"{p}\\..*"],
                                                          "rename": {"policy": "prefix", "prefix": "src."}})
    provision(spec_path)
    assert dest_topics(clusters, [f"src.{p}.orders"])[f"src.{p}.orders"].partitions == 2

    from confluent_kafka.admin import NewPartitions

    clusters.admin("source").create_partitions([NewPartitions(f"{p}.orders", 5)])[f"{p}.orders"].result(30)
    result = provision(spec_path)

    assert dest_topics(clusters, [f"src.{p}.orders"])[f"src.{p}.orders"].partitions == 5
    assert any("partitions 2 -> 5" in line for line in result["applied"])


def test_destination_with_more_partitions_is_refused_before_anything_is_created(clusters, tmp_path):
    p = clusters.unique("refuse")
    clusters.create_topic("source", f"{p}.a-new", 1)
    clusters.create_topic("source", f"{p}.b-wide", 2)
    clusters.create_topic("destination", f"{p}.b-wide", 4)
    spec_path = write_spec(tmp_path, clusters, p)

    with pytest.raises(AirflowFailException, match=r"destination has 4 partitions, source .* has 2") as raised:
        provision(spec_path)
    assert isinstance(raised.value.__cause__, ProvisioningRefused)  # fails the task without retry
    with pytest.raises(AirflowFailException):
        MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})

    assert dest_topics(clusters, [f"{p}.a-new"]) == {}


def test_incompatible_cleanup_policy_is_refused(clusters, tmp_path):
    p = clusters.unique("policy")
    clusters.create_topic("source", f"{p}.t", 1, {"cleanup.policy": "compact"})
    clusters.create_topic("destination", f"{p}.t", 1, {"cleanup.policy": "delete"})
    with pytest.raises(AirflowFailException, match="cleanup.policy is delete on the destination but compact"):
        provision(write_spec(tmp_path, clusters, p))


def test_dry_run_and_preflight_change_nothing(clusters, tmp_path):
    p = clusters.unique("dry")
    clusters.create_topic("source", f"{p}.t", 3)
    spec_path = write_spec(tmp_path, clusters, p)

    planned = provision(spec_path, dry_run=True)
    diff = MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})

    assert planned["dry_run"] is True and len(planned["changes"]) == 1
    assert diff["topics"]["changes"] == planned["changes"]
    assert dest_topics(clusters, [f"{p}.t"]) == {}


def test_preflight_names_an_unknown_connection_and_fails_without_retry(clusters, tmp_path):
    p = clusters.unique("conn")
    spec_path = write_spec(tmp_path, clusters, p, destination={"connection_id": "no_such_conn", "alias": "dst"})
    with pytest.raises(AirflowFailException) as raised:
        MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})
    line = Path(spec_path).read_text().splitlines().index("  connection_id: no_such_conn") + 1
    assert str(raised.value) == f"{spec_path}:{line}: field 'destination.connection_id' = 'no_such_conn': no " \
                                "Airflow connection with this id"
    assert isinstance(raised.value.__cause__, SpecError)


def test_a_config_the_destination_refuses_fails_without_retry(clusters, tmp_path):
    p = clusters.unique("badcfg")
    topic = clusters.create_topic("destination", f"{p}.t", 1)
    hook = clusters.cluster("destination")

    with pytest.raises(KafkaClusterError) as raised:
        hook.set_topic_configs(topic, {"retention.ms": "soon"})

    assert raised.value.permanent
    assert str(raised.value) == (
        f"Kafka connection '{clusters.DESTINATION_CONN}' (bootstrap servers {clusters.destination_bootstrap}): "
        f"alter configs of ConfigResource(ResourceType.TOPIC,{topic}) failed: Invalid value soon for configuration "
        "retention.ms: Not a number of type LONG")
    assert is_deterministic(raised.value)


def commit_offsets(clusters, side, group, topic, offsets):
    from confluent_kafka import TopicPartition

    consumer = clusters.consumer(side, group)
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    consumer.close()


def test_groups_are_recorded_and_an_active_destination_group_is_refused(clusters, tmp_path):
    p = clusters.unique("groups")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    producer = clusters.producer("source")
    for i in range(10):
        producer.produce(topic, value=b"x", partition=i % 2)
    producer.flush(30)
    commit_offsets(clusters, "source", f"{p}-billing", topic, {0: 3, 1: 2})
    commit_offsets(clusters, "source", f"{p}-other-topic-only", clusters.create_topic("source", f"x{p}", 1), {0: 0})
    commit_offsets(clusters, "source", f"unselected-{p}", topic, {0: 1})
    spec_path = write_spec(tmp_path, clusters, p)
    provision(spec_path)

    plan = ProvisionMirrorGroupsOperator(task_id="g", spec_path=spec_path).execute({})

    assert plan["migrated"] == {f"{p}-billing": [topic]}
    assert "no committed offsets on migrated topics" in plan["skipped"][f"{p}-other-topic-only"]
    store = MigrationStateStore(clusters.cluster("destination"), f"kafka-ferry.{p}.state")
    assert store.read_kind(GROUP_KIND)[f"{p}-billing"]["source_topics"] == [topic]

    # A consumer of the same group name is live on the destination: refuse, record nothing new.
    clusters.create_topic("destination", f"{p}.live", 1)
    live = clusters.consumer("destination", f"{p}-billing")
    live.subscribe([f"{p}.live"])
    deadline = time.monotonic() + 30
    while not live.assignment() and time.monotonic() < deadline:
        live.poll(0.5)
    try:
        with pytest.raises(AirflowFailException, match=rf"group {p}-billing: has 1 active member"):
            ProvisionMirrorGroupsOperator(task_id="g", spec_path=spec_path).execute({})
    finally:
        live.close()


def test_credentials_stay_out_of_xcom_and_logs(clusters, tmp_path, monkeypatch, caplog, capfd):
    import json

    secret = "s3cret-" + clusters.unique("pw")
    monkeypatch.setenv("AIRFLOW_CONN_KF_TEST_SOURCE_SECRET", json.dumps({"conn_type": "kafka", "extra": {
        "bootstrap.servers": clusters.source_bootstrap, "sasl.username": "ferry", "sasl.password": secret}}))
    p = clusters.unique("secret")
    clusters.create_topic("source", f"{p}.t", 1)
    spec_path = write_spec(tmp_path, clusters, p,
                           source={"connection_id": "kf_test_source_secret", "alias": "src"})
    caplog.set_level("DEBUG")

    diff = MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})
    applied = provision(spec_path)

    out, err = capfd.readouterr()
    for text in (json.dumps(diff), json.dumps(applied), caplog.text, out, err):
        assert secret not in text
    assert diff["topics"]["changes"]  # the run did real work through that connection
