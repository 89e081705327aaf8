"""``provision.acls.migrate_acls`` on the in-memory clusters of ``tests/fakes``: what a run created, found present and
refused is recorded in the state topic (kind ``acl-migration``) only after the create, only entries the destination
accepted, never by a dry run, and not again by a run that changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.acls.acl_record import entry_of
from kafka_ferry.core.common.state_records import ACL_MIGRATION_KIND
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.kafka.acls import AclsPartlyCreated
from kafka_ferry.provision.acls import AclMigrationNotAuthorized, migrate_acls

SPEC = load_spec(Path(__file__).resolve().parents[3] / "dags" / "migrations" / "demo-tenant.yaml").model_copy(
    update={"schema_registry": None})  # identity rename, no principal map
READ = AclEntry("User:app", "TOPIC", "demo.orders", "READ")
WRITE = AclEntry("User:app", "TOPIC", "demo.orders", "WRITE")
DENY = AclEntry("User:app", "TOPIC", "demo.pay", "READ", permission="DENY")


def clusters():
    source, destination = FakeCluster("source"), FakeCluster("destination")
    for name in ("demo.orders", "demo.pay"):
        source.create_topic(name, 1, 1, {})
    source.grant(READ, WRITE, DENY, AclEntry("User:app", "TOPIC", "other", "READ"))
    destination.grant(WRITE)  # an administrator's: present, never the migration's
    return source, destination, FakeStateStore(destination).created()


def test_a_dry_run_records_nothing_and_creates_nothing():
    source, destination, store = clusters()
    before = list(store.log)
    plan = migrate_acls(SPEC, source, destination, store, dry_run=True, run_id="r0")
    assert sorted(plan.create) == [READ, DENY] and destination.acls == [WRITE]
    assert store.log == before


def test_a_run_records_what_it_created_and_a_second_run_that_creates_nothing_records_nothing():
    source, destination, store = clusters()
    migrate_acls(SPEC, source, destination, store, run_id="r1")
    records = store.read_kind(ACL_MIGRATION_KIND)
    assert list(records) == ["r1"]
    assert [entry_of(row) for row in records["r1"]["created"]] == [READ, DENY]
    assert (records["r1"]["present"], records["r1"]["refused"]) == (1, [])

    writes = len(store.log)
    plan = migrate_acls(SPEC, source, destination, store, run_id="r2")
    assert (plan.create, len(plan.present)) == ([], 3)
    assert len(store.log) == writes  # idempotent: no record, no noise


def test_a_create_that_fails_part_way_records_only_what_was_created():
    source, destination, store = clusters()
    destination.acl_create_errors[DENY] = KafkaError.INVALID_REQUEST
    with pytest.raises(AclsPartlyCreated, match="create ACL DENY READ on TOPIC 'demo.pay'") as raised:
        migrate_acls(SPEC, source, destination, store, run_id="r1")
    assert raised.value.created == (READ,)
    assert [entry_of(row) for row in store.read_kind(ACL_MIGRATION_KIND)["r1"]["created"]] == [READ]

    del destination.acl_create_errors[DENY]  # the task's retry, same run: both listed, one record
    migrate_acls(SPEC, source, destination, store, run_id="r1")
    records = store.read_kind(ACL_MIGRATION_KIND)
    assert list(records) == ["r1"] and [entry_of(row) for row in records["r1"]["created"]] == [READ, DENY]


def test_a_destination_principal_that_may_not_create_acls_fails_once_naming_the_grant_and_the_way_out():
    """CreateAcls refused for every entry (CLUSTER_AUTHORIZATION_FAILED, as Kafka answers a principal without ALTER
    on the cluster): a permanent failure naming what to grant and ``acls.migrate: false``, nothing recorded."""
    from kafka_ferry.core.common.failures import retry_cannot_help

    source, destination, store = clusters()
    for entry in (READ, DENY):
        destination.acl_create_errors[entry] = KafkaError.CLUSTER_AUTHORIZATION_FAILED
    before = list(store.log)
    with pytest.raises(AclMigrationNotAuthorized) as raised:
        migrate_acls(SPEC, source, destination, store, run_id="r1")
    message = str(raised.value)
    assert "grant ALLOW ALTER on CLUSTER 'kafka-cluster' for User:ANONYMOUS" in message
    assert "nothing was changed" in message and "set acls.migrate: false" in message
    assert not any(word in message for word in ("delete", "reset", "remove"))  # never a destructive way out
    assert retry_cannot_help(raised.value)
    assert destination.acls == [WRITE] and store.log == before


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_principal_without_the_cluster_grants_is_refused_before_listing_naming_each_grant(dry_run):
    """Without DESCRIBE on the cluster a broker lists no ACLs rather than refusing (the fake answers as the test
    bed's brokers do): the migration would find nothing and say nothing. It is refused first, dry run or not, naming
    each missing grant per connection and ``acls.migrate: false``; nothing is created or recorded."""
    source, destination, store = clusters()
    source_as, destination_as = source.as_principal("User:mig-src"), destination.as_principal("User:mig-dst")
    destination.grant(AclEntry("User:mig-dst", "CLUSTER", "kafka-cluster", "ALTER"))  # implies DESCRIBE
    before = list(store.log)
    with pytest.raises(AclMigrationNotAuthorized) as raised:
        migrate_acls(SPEC, source_as, destination_as, store, dry_run=dry_run, run_id="r1")
    message = str(raised.value)
    assert "grant ALLOW DESCRIBE on CLUSTER 'kafka-cluster' for User:mig-src on connection 'source'" in message
    assert "User:mig-dst" not in message  # ALTER implies DESCRIBE: the destination has what it needs
    assert "nothing was changed" in message and "set acls.migrate: false" in message
    assert destination.acls == [WRITE, AclEntry("User:mig-dst", "CLUSTER", "kafka-cluster", "ALTER")]
    assert store.log == before

    source.grant(AclEntry("User:mig-src", "CLUSTER", "kafka-cluster", "DESCRIBE"),
                 *(AclEntry("User:mig-src", "TOPIC", t, "DESCRIBE") for t in ("demo.orders", "demo.pay")))
    plan = migrate_acls(SPEC, source_as, destination_as, store, dry_run=dry_run, run_id="r1")
    assert {READ, DENY} <= set(plan.create)  # granted: the source's ACLs are listed and planned
