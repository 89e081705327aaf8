"""The rollback's rights probe (``promotion.rollback_rights``) asks for CREATE as the copy-back's CreateTopics is
authorized: a validate-only CreateTopics, also on a copy-back topic a first rollback left there, so CREATE granted on
the CLUSTER (which a topic's KIP-430 authorized operations leave out) passes a resumed or second rollback too."""

from __future__ import annotations

import pytest

from kafka_ferry.core.spec import parse_spec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.promotion import rollback_rights
from kafka_ferry.promotion.rollback_rights import RollbackAclsMissing, check_rollback_rights

STATE, SYNCS = "kafka-ferry.m1.state.rollback", "mm2-offset-syncs.a.internal"
# what the broker answers on each existing resource for a principal granted CREATE on the cluster, not on the topics
SECOND_ROLLBACK = {"TOPIC": {"orders.a": {"DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"},
                             STATE: {"DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"},
                             SYNCS: {"DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"}},
                   "GROUP": {"g": {"DESCRIBE", "READ"}}}


def spec():
    return parse_spec({"name": "m1", "tenant": "t", "source": {"connection_id": "src", "alias": "a"},
                       "destination": {"connection_id": "dst", "alias": "b"}, "topics": {"include": ["orders.*"]}})


@pytest.fixture
def source():
    return KafkaCluster("source", {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_SSL",
                                   "sasl.username": "ferry-src"})


def broker(monkeypatch, refusal):
    """The authorizer's answers: ``SECOND_ROLLBACK`` for authorized operations, ``refusal`` (None: allowed) for every
    validate-only CreateTopics; returns the topics the probe asked to create."""
    asked = []
    monkeypatch.setattr(rollback_rights, "authorized_operations",
                        lambda cluster, kind, names: {n: SECOND_ROLLBACK[kind][n] for n in names
                                                      if n in SECOND_ROLLBACK[kind]})
    monkeypatch.setattr(rollback_rights, "may_create_topic", lambda cluster, name: asked.append(name) or refusal)
    return asked


def test_cluster_create_passes_a_rollback_whose_copy_back_topics_exist_already(monkeypatch, source):
    asked = broker(monkeypatch, None)  # CREATE on the cluster: the validate-only CreateTopics is accepted
    needed = check_rollback_rights(spec(), source, "rollback of 'm1'", ["orders.a"], ["g"])
    assert sorted(asked) == [STATE, SYNCS]  # asked as the copy-back's CreateTopics is, not by the KIP-430 answer
    assert rollback_rights.probe(source, needed) == {"missing": [], "unchecked": []}  # nothing left to its calls


def test_a_principal_without_create_is_refused_naming_each_existing_copy_back_topic(monkeypatch, source):
    broker(monkeypatch, "Broker: Topic authorization failed")
    with pytest.raises(RollbackAclsMissing) as failure:
        check_rollback_rights(spec(), source, "rollback of 'm1'", ["orders.a"], ["g"])
    message = str(failure.value)
    assert f"grant ALLOW CREATE on TOPIC '{STATE}' for User:ferry-src" in message
    assert f"grant ALLOW CREATE on TOPIC '{SYNCS}' for User:ferry-src" in message
    assert message.count("grant ALLOW") == 2  # the KIP-430 answers hold the rest
