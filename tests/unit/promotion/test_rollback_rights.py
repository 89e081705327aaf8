"""The rollback's rights probe (``promotion.rollback_rights``) asks for CREATE as the copy-back's CreateTopics is
authorized: a validate-only CreateTopics, also on a copy-back topic a first rollback left there, so CREATE granted on
the CLUSTER (which a topic's KIP-430 authorized operations leave out) passes a resumed or second rollback too.

The source is the in-memory cluster (``tests/fakes``), whose authorizer answers as Kafka's does (checked by
``test_fakes_contract.py``)."""

from __future__ import annotations

import pytest
from fakes.cluster import FakeCluster

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.promotion import rollback_rights
from kafka_ferry.promotion.rollback_rights import RollbackAclsMissing, check_rollback_rights

STATE, SYNCS = "kafka-ferry.m1.state.rollback", "mm2-offset-syncs.a.internal"
PRINCIPAL = "User:ferry-src"
# what the broker answers on each existing resource for a principal granted CREATE on the cluster, not on the topics
SECOND_ROLLBACK = {"TOPIC": {"orders.a": {"DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"},
                             STATE: {"DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"},
                             SYNCS: {"DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"}},
                   "GROUP": {"g": {"DESCRIBE", "READ"}}}


def spec():
    return parse_spec({"name": "m1", "tenant": "t", "source": {"connection_id": "src", "alias": "a"},
                       "destination": {"connection_id": "dst", "alias": "b"}, "topics": {"include": ["orders.*"]}})


def source(cluster_create: bool) -> FakeCluster:
    """A second rollback's source: the copy-back topics exist, the principal holds ``SECOND_ROLLBACK`` (and CREATE
    on the CLUSTER when ``cluster_create``)."""
    admin = FakeCluster("source")
    for topic in SECOND_ROLLBACK["TOPIC"]:
        admin.create_topic(topic, 1, 1, {})
    admin.grant(*(AclEntry(PRINCIPAL, kind, name, op) for kind, names in SECOND_ROLLBACK.items()
                  for name, ops in names.items() for op in ops))
    if cluster_create:
        admin.grant(AclEntry(PRINCIPAL, "CLUSTER", "kafka-cluster", "CREATE"))
    return admin.as_principal(PRINCIPAL)


def test_cluster_create_passes_a_rollback_whose_copy_back_topics_exist_already():
    cluster = source(cluster_create=True)  # CREATE on the cluster: the validate-only CreateTopics is accepted
    needed = check_rollback_rights(spec(), cluster, "rollback of 'm1'", ["orders.a"], ["g"])
    asked = [name for request, name in cluster.requests if request == "validate_create"]
    assert sorted(asked) == [STATE, SYNCS]  # asked as the copy-back's CreateTopics is, not by the KIP-430 answer
    assert rollback_rights.probe(cluster, needed) == {"missing": [], "unchecked": []}  # nothing left to its calls
    assert sorted(cluster.topics) == sorted(SECOND_ROLLBACK["TOPIC"])  # validate-only: nothing was created


def test_a_principal_without_create_is_refused_naming_each_existing_copy_back_topic():
    with pytest.raises(RollbackAclsMissing) as failure:
        check_rollback_rights(spec(), source(cluster_create=False), "rollback of 'm1'", ["orders.a"], ["g"])
    message = str(failure.value)
    assert f"grant ALLOW CREATE on TOPIC '{STATE}' for {PRINCIPAL}" in message
    assert f"grant ALLOW CREATE on TOPIC '{SYNCS}' for {PRINCIPAL}" in message
    assert message.count("grant ALLOW") == 2  # the KIP-430 answers hold the rest
