"""Fencing during a staged cutover (``acls.fence``), on real authorizers: put by provisioning, lifted unit by unit.

A consumer of a group not promoted yet is refused on the destination, and reads from the translated offset once
its group is promoted; a producer other than the migration's is refused on a mirror until its topic is promoted.
The migration itself (copy, commits) runs through the fences as the principal holding the minimum ACLs.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from scenarios import consume_as_group, provision, provision_groups
from test_fences import _consume_error, _produce
from test_least_privilege import LP_DESTINATION, LP_SOURCE, PARTITIONS, secure_migration

from kafka_ferry.copy.catch_up import threads_engine
from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.common.state_records import FENCE_KIND
from kafka_ferry.hooks.kafka_cluster import kafka_cluster
from kafka_ferry.kafka.acls import create_acls, describe_acls
from kafka_ferry.promotion.group import promote_group
from kafka_ferry.promotion.steps import PromotionRunner
from kafka_ferry.promotion.topic import promote_topics
from kafka_ferry.provision.fences import put_fences
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration


def fenced_migration(private, tmp_path, prefix: str) -> tuple[dict, dict]:
    """A secure migration with `acls.fence`, provisioned: the tenant's reader and writer are fenced out."""
    m = secure_migration(private, tmp_path, prefix, acls={"fence": True})
    group, topics = m["group"], m["topics"]
    tenant = {name: private.create_principal("destination", f"{m['p']}-{name}") for name in ("reader", "app")}
    config = {name: private.sasl_config("destination", *tenant[name]) for name in tenant}
    create_acls(private.cluster("destination"), [  # what the tenant's apps hold on the destination (ACL migration)
        *(AclEntry(f"User:{tenant['reader'][0]}", "TOPIC", t, "READ") for t in topics),
        AclEntry(f"User:{tenant['reader'][0]}", "GROUP", group, "READ"),
        AclEntry(f"User:{tenant['app'][0]}", "TOPIC", m["p"], "WRITE", pattern_type="PREFIXED"),
    ])

    provision(m["spec_path"])
    fences = provision_groups(m["spec_path"])["fences"]
    assert sorted(fences) == sorted([f"GROUP:{group}", *(f"TOPIC:{t}" for t in topics)])
    assert _consume_error(config["reader"], group, topics[0]).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert _produce(config["app"], topics[0]).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    return m, config


def test_fences_hold_early_readers_and_stray_writers_off_until_each_unit_is_promoted(private, tmp_path, work_dir):
    m, config = fenced_migration(private, tmp_path, "fen")
    spec, group, topics = m["spec"], m["group"], m["topics"]
    source, destination = kafka_cluster(LP_SOURCE), kafka_cluster(LP_DESTINATION)
    store = MigrationStateStore(destination, spec.state_topic_name)
    promoted = promote_group(spec, source, destination, store, group, "run-group", threads_engine(4))
    lifted = promoted.detail["promoted"]
    assert promoted.promoted and isinstance(lifted, dict) and lifted["fence_lifted"]
    for t in topics:  # the group resumes on the destination exactly where it stopped on the source
        received = consume_as_group(private, group, t, PARTITIONS)
        assert received == {q: [o for o in m["committed"][t][q] if o >= m["positions"][(t, q)]]
                            for q in range(PARTITIONS)}
    assert _consume_error(config["reader"], group, topics[0]) is None  # the group's own principal reads now
    assert _produce(config["app"], topics[0]).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED  # topic not yet

    promote_topics(spec, source, destination, store, topics, "run-topics", threads_engine(4), quiet_window_s=1)
    assert _produce(config["app"], topics[0]) is None and _produce(config["app"], topics[1]) is None
    assert store.read_kind(FENCE_KIND) == {}
    assert put_fences(spec, source, destination, store) == {}  # promoted units are never fenced again


def test_the_whole_migration_promotion_lifts_every_fence_before_it_marks_the_migration_promoted(
        private, tmp_path, work_dir):
    m, config = fenced_migration(private, tmp_path, "fenall")
    spec, group, topics = m["spec"], m["group"], m["topics"]
    destination = kafka_cluster(LP_DESTINATION)
    store = MigrationStateStore(destination, spec.state_topic_name)
    assert len(store.read_kind(FENCE_KIND)) == 1 + len(topics)

    promoted = PromotionRunner(spec, kafka_cluster(LP_SOURCE), destination, store, work_dir=work_dir).run()

    assert promoted["status"] == "promoted"
    assert promoted["this_run"]["mark_promoted"]["summary"]["fences_lifted"] == 1 + len(topics)
    assert store.read_kind(FENCE_KIND) == {}
    for t in topics:  # the group resumes on the destination exactly where it stopped on the source
        assert consume_as_group(private, group, t, PARTITIONS) == {
            q: [o for o in m["committed"][t][q] if o >= m["positions"][(t, q)]] for q in range(PARTITIONS)}
    assert _consume_error(config["reader"], group, topics[0]) is None
    assert all(_produce(config["app"], t) is None for t in topics)
    deny = [e for e in describe_acls(private.cluster("destination")) if e.permission == "DENY"
            and (e.resource_name in topics or e.resource_name == group)]
    assert deny == []  # nothing of the migration's left behind


def test_a_fence_put_while_its_unit_is_promoted_does_not_outlive_the_promotion(private, tmp_path, work_dir,
                                                                                monkeypatch):
    """A catch-up run's provisioning fences while promotions run; in each interleaving one side sees the other and
    the promoted unit ends unfenced (provision.fences.put_fences). Driven through the run's ACL creation (test seam):
      group    the whole promotion runs between the run's fence record and its ACLs
      topic 0  the promotion's lift runs there, its promoted mark after the run (the run finds its record gone)
      topic 1  the promotion lifted before the run; its mark and second look come after the run
    """
    import kafka_ferry.provision.fences as fences
    from kafka_ferry.core.common.state_records import TOPIC_PROMOTION_KIND
    from kafka_ferry.core.cutover.staged_cutover import UnitPromotion
    from kafka_ferry.state.staged_cutover import save_promotion

    m, config = fenced_migration(private, tmp_path, "fenrace")
    spec, group, topics = m["spec"], m["group"], m["topics"]
    source, destination = kafka_cluster(LP_SOURCE), kafka_cluster(LP_DESTINATION)
    store = MigrationStateStore(destination, spec.state_topic_name)
    topic_key = [fences.topic_fence_key(spec.topics.rename.destination_topic(t)) for t in topics]

    def mark_promoted(topic: str, key: str) -> None:  # what promote_topics does after its lift, in this order
        save_promotion(store, TOPIC_PROMOTION_KIND,
                       UnitPromotion(topic, "run-race", started_at_ms=1).with_step(TOPIC_PROMOTION_KIND, "promoted", 2))
        fences.lift_after_promoted(destination, store, key)

    fences.lift_fence(destination, store, topic_key[1])  # topic 1: the promotion's lift, before the run
    real_create = fences.create_acls

    def promotions_overtake(cluster, entries):
        promote_group(spec, source, destination, store, group, "run-race", threads_engine(4))
        fences.lift_fence(destination, store, topic_key[0])
        real_create(cluster, entries)

    monkeypatch.setattr(fences, "create_acls", promotions_overtake)
    put = put_fences(spec, source, destination, store)
    monkeypatch.undo()
    assert f"GROUP:{group}" not in put and topic_key[0] not in put, put
    assert _consume_error(config["reader"], group, topics[0]) is None  # the promoted group's consumer reads

    mark_promoted(topics[0], topic_key[0])
    mark_promoted(topics[1], topic_key[1])
    assert store.read_kind(FENCE_KIND) == {}
    assert _produce(config["app"], topics[0]) is None and _produce(config["app"], topics[1]) is None
    deny = [e for e in describe_acls(private.cluster("destination")) if e.permission == "DENY"
            and (e.resource_name in topics or e.resource_name == group)]
    assert deny == []
