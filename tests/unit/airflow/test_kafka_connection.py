"""A `kafka` connection becomes kafka-ferry's one cluster client, named by the connection id."""

from __future__ import annotations

import json

import pytest

from kafka_ferry.hooks.kafka_cluster import KafkaClusterHook, cluster_of, kafka_cluster
from kafka_ferry.kafka.cluster import KafkaCluster


def test_get_conn_is_the_cluster_of_the_connection(monkeypatch):
    extra = {"bootstrap.servers": "127.0.0.1:1", "sasl.username": "ferry", "sasl.password": "hunter2"}
    monkeypatch.setenv("AIRFLOW_CONN_KF_UNIT_SRC", json.dumps({"conn_type": "kafka", "extra": extra}))
    hook = KafkaClusterHook("kf_unit_src")
    kafka = hook.get_conn
    assert isinstance(kafka, KafkaCluster) and kafka is hook.get_conn  # built once per hook
    assert kafka.name == "kf_unit_src" and kafka.client_config == extra
    assert kafka_cluster("kf_unit_src").client_config == extra
    assert "hunter2" not in repr(kafka)


def test_a_connection_without_bootstrap_servers_is_refused(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KF_UNIT_EMPTY", json.dumps({"conn_type": "kafka", "extra": {}}))
    with pytest.raises(ValueError, match="bootstrap.servers"):
        kafka_cluster("kf_unit_empty")


def test_a_connection_already_fetched_is_built_without_looking_it_up_again():
    """The trigger (fetched without blocking) and the command (from the metadata DB) hand their connection over:
    no environment variable, secrets backend or DB names ``kf_unit_given``, so a lookup would fail."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    extra = {"bootstrap.servers": "127.0.0.1:1", "sasl.username": "ferry", "sasl.password": "hunter2"}
    given = Connection(conn_id="kf_unit_given", conn_type="kafka", extra=json.dumps(extra))
    kafka = cluster_of(given, "kf_unit_given")
    assert isinstance(kafka, KafkaCluster)
    assert kafka.name == "kf_unit_given" and kafka.client_config == extra
    with pytest.raises(AirflowNotFoundException, match="kf_unit_given"):  # the hook class still looks them up
        kafka_cluster("kf_unit_given")
