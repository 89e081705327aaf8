"""The one Kafka client: what it is built from, what it names, and what it never shows (no broker needed)."""

from __future__ import annotations

from confluent_kafka import KafkaError

from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.configs import cluster
from kafka_ferry.kafka.errors import KafkaClusterError

SECRET = "hunter2-secret"
CONFIG = {"bootstrap.servers": "ferry@127.0.0.1:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
          "sasl.username": "ferry", "sasl.password": SECRET}


def test_repr_and_errors_name_the_cluster_and_its_addresses_but_never_the_secret():
    kafka = KafkaCluster("kf_source", CONFIG)
    assert repr(kafka) == "KafkaCluster('kf_source', bootstrap.servers='ferry@127.0.0.1:1')"
    error = KafkaClusterError.on(kafka, "list topics", KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED),
                                 acl={"TOPIC": ("DESCRIBE", "orders")})
    message = str(error)
    assert message.startswith("Kafka connection 'kf_source' (bootstrap servers 127.0.0.1:1): list topics failed")
    assert "User:ferry" in message and error.permanent  # who to grant to, and no retry can cure it
    assert SECRET not in message + repr(kafka)


def test_the_config_handed_out_is_a_copy():
    kafka = KafkaCluster("kf_source", CONFIG)
    handed = kafka.client_config
    handed["bootstrap.servers"] = "elsewhere:9092"
    assert kafka.bootstrap_servers == "ferry@127.0.0.1:1"


def test_producers_are_shared_per_override_set_only_when_asked():
    shared = KafkaCluster("destination", {"bootstrap.servers": "127.0.0.1:1"}, reuse_producers=True)
    assert shared.producer(acks="all") is shared.producer(acks="all")
    assert shared.producer(acks="all") is not shared.producer(acks="1")
    fresh = KafkaCluster("destination", {"bootstrap.servers": "127.0.0.1:1"})
    assert fresh.producer(acks="all") is not fresh.producer(acks="all")


def test_the_job_names_a_cluster_by_its_role():
    configs = {"source": {"bootstrap.servers": "a:1"}, "destination": {"bootstrap.servers": "b:2"}}
    destination = cluster(configs, "destination")
    assert (destination.name, destination.bootstrap_servers) == ("destination", "b:2")


def test_nothing_to_write_is_written_without_a_producer():
    kafka = KafkaCluster("destination", {"bootstrap.servers": "127.0.0.1:1"}, reuse_producers=True)
    assert kafka.produce_and_wait("anything", []) == 0
    assert kafka._producers == {}
