"""A rollback's fences on real authorizers (``acls.fence``): once a staged topic (with the group reading it) or the
whole migration is rolled back, the destination is fenced again for those groups and topics (a tenant's consumer and
producer are refused there), and on the source nothing is lifted or put: the migration put no ACL there, and an ACL
another team put stays.

The rollback writes to the source (the copy-back, the group commits), which the catch-up's minimum ACLs do not
grant: both sides run here as the migration's least-privilege principals, the source's granted the rollback's own
ACLs (``core.acls.acl_plan.rollback_acls``) for the topics and groups that go back."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from test_fences import _consume_error, _produce
from test_fences_staged import fenced_migration
from test_least_privilege import LP_DESTINATION, LP_SOURCE

from kafka_ferry.copy.catch_up import threads_engine
from kafka_ferry.core.acls.acl_plan import AclEntry, rollback_acls
from kafka_ferry.core.common.state_records import FENCE_KIND
from kafka_ferry.hooks.kafka_cluster import kafka_cluster
from kafka_ferry.kafka.acls import create_acls, describe_acls
from kafka_ferry.promotion.group import promote_group
from kafka_ferry.promotion.rollback import RollbackRunner
from kafka_ferry.promotion.steps import PromotionRunner
from kafka_ferry.promotion.topic import promote_topics
from kafka_ferry.promotion.topic_rollback import rollback_topics
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration


def other_teams_acls(private, m, rolled_back_topics=None) -> set:
    """ACLs another team holds on the source for the migrated group and topics, and the rollback's for the
    migration's principal (``rolled_back_topics``: copied back into; default all); the source's ACLs with them."""
    other = f"User:{m['p']}-other-team"
    create_acls(private.cluster("source"), [AclEntry(other, "TOPIC", m["topics"][0], "WRITE"),
                                           AclEntry(other, "GROUP", m["group"], "READ", permission="DENY")])
    topics = m["topics"] if rolled_back_topics is None else rolled_back_topics
    create_acls(private.cluster("source"),
                rollback_acls(m["spec"], f"User:{m['users']['source'][0]}", topics, [m["group"]]).source)
    return set(describe_acls(private.cluster("source")))


def assert_fenced_again(private, m, config, store) -> None:
    group, topics = m["group"], m["topics"]
    assert sorted(store.read_kind(FENCE_KIND)) == sorted([f"GROUP:{group}", *(f"TOPIC:{t}" for t in topics)])
    assert _consume_error(config["reader"], group, topics[0]).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    for t in topics:
        assert _produce(config["app"], t).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_staged_topic_rollback_fences_the_destination_again_and_lifts_nothing_on_the_source(
        private, tmp_path, work_dir):
    m, config = fenced_migration(private, tmp_path, "fenrbt")
    spec, group, topics = m["spec"], m["group"], m["topics"]
    source_acls = other_teams_acls(private, m)
    source, destination = kafka_cluster(LP_SOURCE), kafka_cluster(LP_DESTINATION)
    store = MigrationStateStore(destination, spec.state_topic_name)
    assert promote_group(spec, source, destination, store, group, "run-group", threads_engine(4)).promoted
    promote_topics(spec, source, destination, store, topics, "run-topics", threads_engine(4), quiet_window_s=1)
    assert store.read_kind(FENCE_KIND) == {}
    assert _produce(config["app"], topics[0]) is None  # the tenant's producer writes on the destination now
    assert _consume_error(config["reader"], group, topics[0]) is None

    done = rollback_topics(spec, source, destination, store, topics, quiesce_window_s=1)

    assert {t: r["status"] for t, r in done.items()} == {t: "rolled-back" for t in topics}
    assert done[topics[0]]["groups"] == [group]
    assert_fenced_again(private, m, config, store)
    assert set(describe_acls(private.cluster("source"))) == source_acls  # the other team's ACLs stay, none added


def test_a_whole_migration_rollback_fences_the_destination_again_and_lifts_nothing_on_the_source(
        private, tmp_path, work_dir):
    m, config = fenced_migration(private, tmp_path, "fenrbm")
    spec, group, topics = m["spec"], m["group"], m["topics"]
    source_acls = other_teams_acls(private, m)
    destination = kafka_cluster(LP_DESTINATION)
    store = MigrationStateStore(destination, spec.state_topic_name)
    promoted = PromotionRunner(spec, kafka_cluster(LP_SOURCE), destination, store, work_dir=work_dir).run()
    assert promoted["status"] == "promoted" and store.read_kind(FENCE_KIND) == {}
    assert _produce(config["app"], topics[1]) is None

    report = RollbackRunner(spec, kafka_cluster(LP_SOURCE), destination, store, work_dir=work_dir,
                            quiesce_window_s=1).run()

    assert report["status"] == "rolled-back"
    assert sorted(report["this_run"]["fences"]["summary"]["fenced"]) == sorted(
        [f"GROUP:{group}", *(f"TOPIC:{t}" for t in topics)])
    assert_fenced_again(private, m, config, store)
    assert set(describe_acls(private.cluster("source"))) == source_acls


def test_a_staged_group_rollback_fences_the_group_again_and_lifts_nothing_on_the_source(private, tmp_path, work_dir):
    from kafka_ferry.promotion.group_rollback import rollback_group

    m, config = fenced_migration(private, tmp_path, "fenrbg")
    spec, group, topics = m["spec"], m["group"], m["topics"]
    source_acls = other_teams_acls(private, m, rolled_back_topics=[])  # a group's rollback copies nothing back
    source, destination = kafka_cluster(LP_SOURCE), kafka_cluster(LP_DESTINATION)
    store = MigrationStateStore(destination, spec.state_topic_name)
    assert promote_group(spec, source, destination, store, group, "run-group", threads_engine(4)).promoted
    assert _consume_error(config["reader"], group, topics[0]) is None  # its fence lifted: the tenant reads

    assert rollback_group(spec, source, destination, store, group)["status"] == "rolled-back"

    assert_fenced_again(private, m, config, store)  # the group fenced again, the topics never stopped being
    assert set(describe_acls(private.cluster("source"))) == source_acls
