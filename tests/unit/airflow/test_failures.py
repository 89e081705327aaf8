"""Which failures fail a task at once (no retry can heal them) and which keep the task's retries."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException
from confluent_kafka import KafkaError

from kafka_ferry.core.acls.acl_plan import FenceRefused
from kafka_ferry.core.provisioning.provisioning_plan import ProvisioningRefused
from kafka_ferry.core.schemas.serialized_fields import FieldsUndecided
from kafka_ferry.core.specs.spec_source import SpecError, SpecProblem
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.promotion.guard import MigrationPromotedError


class Task:
    def __init__(self, error: Exception):
        self.error = error

    @fail_fast
    def execute(self, context):
        raise self.error


def kafka_error(code: int, reason: str) -> KafkaClusterError:
    return KafkaClusterError("kafka_source", "describe cluster", KafkaError(code, reason),
                             "broker-1:9092,ferry@broker-2:9092")


DETERMINISTIC = [
    ("invalid spec", SpecError("acme.yaml", [SpecProblem("name", "Bad Name", "not a valid name", line=1)]),
     "acme.yaml:1: field 'name' = 'Bad Name': not a valid name"),
    ("missing connection", AirflowNotFoundException("The conn_id `spark_default` isn't defined"),
     "The conn_id `spark_default` isn't defined"),
    ("provisioning refused", ProvisioningRefused(["topic t: destination has 4 partitions, source has 2"]),
     "provisioning refused, nothing was changed:\n  - topic t: destination has 4 partitions, source has 2"),
    ("already promoted", MigrationPromotedError("migration acme was promoted"), "migration acme was promoted"),
    ("ACL refusal", kafka_error(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed"),
     "Kafka connection 'kafka_source' (bootstrap servers broker-1:9092,broker-2:9092): describe cluster failed: "
     "Topic authorization failed (the connection's principal lacks a topic ACL)"),
    ("config refusal", kafka_error(KafkaError.INVALID_CONFIG, "Invalid value abc for configuration retention.ms"),
     "Kafka connection 'kafka_source' (bootstrap servers broker-1:9092,broker-2:9092): describe cluster failed: "
     "Invalid value abc for configuration retention.ms"),
    ("authentication", kafka_error(KafkaError.SASL_AUTHENTICATION_FAILED, "Authentication failed"),
     "Kafka connection 'kafka_source' (bootstrap servers broker-1:9092,broker-2:9092): describe cluster failed: "
     "Authentication failed (authentication failed: check the SASL settings of the connection)"),
    ("fence needs a wildcard DENY", FenceRefused("cannot fence TOPIC 't': ALLOW WRITE ... for User:*"),
     "cannot fence TOPIC 't': ALLOW WRITE ... for User:*"),
    ("topic without a serialized-fields decision", FieldsUndecided("topic 't' has no decision"),
     "topic 't' has no decision"),
]


@pytest.mark.parametrize(("label", "error", "message"), DETERMINISTIC, ids=[d[0] for d in DETERMINISTIC])
def test_deterministic_failures_fail_the_task_without_retry(label, error, message):
    with pytest.raises(AirflowFailException) as raised:
        Task(error).execute({})
    assert raised.value.__cause__ is error
    assert str(raised.value) == message


TRANSIENT = [
    ("timeout", kafka_error(KafkaError._TIMED_OUT, "no answer within 30 s")),
    ("unreachable", kafka_error(KafkaError._TRANSPORT, "Connection refused")),
    ("all brokers down", kafka_error(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down")),
    ("coordinator loading", kafka_error(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "Coordinator load in progress")),
    ("leader change", kafka_error(KafkaError.NOT_LEADER_FOR_PARTITION, "Not leader for partition")),
    ("anything else", RuntimeError("disk full")),
]


@pytest.mark.parametrize(("label", "error"), TRANSIENT, ids=[t[0] for t in TRANSIENT])
def test_transient_failures_keep_the_retries(label, error):
    with pytest.raises(type(error)) as raised:
        Task(error).execute({})
    assert raised.value is error


def test_kafka_errors_name_the_addresses_tried_but_no_user_part():
    error = kafka_error(KafkaError._TRANSPORT, "Connection refused")
    assert str(error) == (
        "Kafka connection 'kafka_source' (bootstrap servers broker-1:9092,broker-2:9092): describe cluster failed: "
        "Connection refused (the cluster is unreachable: check bootstrap.servers and the network)")
    assert "ferry" not in str(error)
    clients = KafkaCluster("destination", {"bootstrap.servers": "dst-1:9092", "sasl.password": "hunter2"})
    on_clients = KafkaClusterError.on(clients, "read tail of t-0", KafkaError(KafkaError._TIMED_OUT, "Timed out"))
    assert str(on_clients) == ("Kafka connection 'destination' (bootstrap servers dst-1:9092): read tail of t-0 "
                               "failed: Timed out (the cluster did not answer in time: check bootstrap.servers and "
                               "that brokers are up)")
    bare = KafkaClusterError("source", "read t-0", KafkaError(KafkaError._TIMED_OUT, "Timed out"))
    assert str(bare) == ("Kafka connection 'source': read t-0 failed: Timed out (the cluster did not answer in time: "
                         "check bootstrap.servers and that brokers are up)")
