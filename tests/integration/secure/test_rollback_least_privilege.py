"""A rollback on the SASL clusters as least-privilege principals: the source principal holds the catch-up's minimum
plus exactly ``core.acls.acl_plan.rollback_acls`` (granted for the rollback only), and every record produced on the
destination after the cutover goes back once. With one of those ACLs missing the rollback fails once (Permanent),
before any change, naming the principal, the resource and the operation: nothing copied, no copy-back topic made.
Once the rollback's ACLs are revoked, later runs still read the copy-back by the minimum; without its DESCRIBE they
fail naming it instead of deciding as if no rollback ran.
"""

from __future__ import annotations

import time

import pytest
from scenarios import provision, provision_groups, read_partition
from test_least_privilege import LP_DESTINATION, LP_SOURCE, PARTITIONS, secure_migration

from kafka_ferry.core.acls.acl_plan import rollback_acls, rollback_internal_topics
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.hooks.kafka_cluster import kafka_cluster
from kafka_ferry.kafka.acls import create_acls, delete_acls, describe_acls
from kafka_ferry.promotion.rollback import RollbackRunner
from kafka_ferry.promotion.rollback_rights import RollbackAclsMissing
from kafka_ferry.promotion.steps import PromotionRunner
from kafka_ferry.state import rollback as rb
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import copied_back

pytestmark = pytest.mark.integration

PER_PARTITION = 7  # records produced on the destination after the cutover, per partition


def promoted_with_writes(private, tmp_path, work_dir, prefix: str, drop=None) -> dict:
    """A least-privilege migration promoted, records produced on its mirrors after the cutover; the source principal
    granted the rollback's ACLs but those ``drop`` (a predicate on an entry) picks."""
    m = secure_migration(private, tmp_path, prefix)
    spec, topics, group = m["spec"], m["topics"], m["group"]
    provision(m["spec_path"])
    provision_groups(m["spec_path"])
    destination = kafka_cluster(LP_DESTINATION)
    store = MigrationStateStore(destination, spec.state_topic_name)
    assert PromotionRunner(spec, kafka_cluster(LP_SOURCE), destination, store,
                           work_dir=work_dir).run()["status"] == "promoted"
    producer = private.producer("destination", **{"enable.idempotence": True})
    for t in topics:  # identity rename: the mirrors carry the source names
        for q in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.produce(t, key=f"k{i}".encode(), value=f"after-{t}-{q}-{i}".encode(), partition=q)
    assert producer.flush(30) == 0
    principal = f"User:{m['users']['source'][0]}"
    acls = rollback_acls(spec, principal, topics, [group])
    create_acls(private.cluster("source"), [e for e in acls.source if not (drop and drop(e))])
    before = {(t, q): read_partition(private, "source", t, q) for t in topics for q in range(PARTITIONS)}
    return {**m, "store": store, "destination": destination, "principal": principal, "rollback_acls": acls,
            "before": before}


def test_a_rollback_as_the_least_privilege_principal_with_exactly_the_rollback_acls(private, tmp_path, work_dir):
    m = promoted_with_writes(private, tmp_path, work_dir, "rbacl")
    spec, topics = m["spec"], m["topics"]
    held = describe_acls(private.cluster("source"), principal=m["principal"])
    assert held == sorted({*m["acls"].source, *m["rollback_acls"].source})  # the minimum and the rollback's, no more

    runner = RollbackRunner(spec, kafka_cluster(LP_SOURCE), m["destination"], m["store"], work_dir=work_dir,
                            quiesce_window_s=1)
    plan = runner.plan()
    assert plan["records"] == len(topics) * PARTITIONS * PER_PARTITION
    assert plan["acls"]["needed"] == m["rollback_acls"].lines() and plan["acls"]["missing"] == []
    report = runner.run()

    assert report["status"] == "rolled-back"
    assert report["this_run"]["copy_back"]["summary"]["records_copied"] == len(topics) * PARTITIONS * PER_PARTITION
    for t in topics:
        for q in range(PARTITIONS):
            after = read_partition(private, "source", t, q)
            old = m["before"][(t, q)]
            assert after[:len(old)] == old  # the source's own records untouched
            assert [r.value for r in after[len(old):]] == [f"after-{t}-{q}-{i}".encode() for i in range(PER_PARTITION)]
    assert describe_acls(private.cluster("source"), principal=m["principal"]) == held

    # revoked after the rollback as docs/security.md says: later runs still read the copy-back by the minimum alone
    delete_acls(private.cluster("source"), m["rollback_acls"].source)
    assert set(copied_back(spec, kafka_cluster(LP_SOURCE), m["store"])) == {(t, q) for t in topics
                                                                              for q in range(PARTITIONS)}
    # the minimum's grants on the copy-back's state topic revoked too (READ alone implies DESCRIBE): the broker hides
    # it, and a later run fails naming it (it used to read "no rollback ran" and resume re-promoted groups past the
    # copied-back records)
    state = rollback_internal_topics(spec)[0]
    delete_acls(private.cluster("source"), [e for e in m["acls"].source if e.resource_name == state])
    deadline = time.monotonic() + 30  # until the broker applies the deletion
    while True:
        try:
            copied_back(spec, kafka_cluster(LP_SOURCE), m["store"])
        except rb.CopyBackNotVisible as exc:
            failure = exc
            break
        assert time.monotonic() < deadline, f"{state} still visible 30 s after its ACLs were revoked"
        time.sleep(0.5)
    assert isinstance(failure, Permanent)
    assert f"grant ALLOW DESCRIBE on TOPIC '{state}' for {m['principal']}" in str(failure), str(failure)


@pytest.mark.parametrize(("resource_type", "operation", "which"), [
    ("TOPIC", "WRITE", "topic"),
    ("GROUP", "READ", "group"),
    ("TOPIC", "CREATE", "state"),
], ids=["write-source-topic", "commit-source-group", "create-copy-back-state"])
def test_a_missing_rollback_acl_fails_once_naming_it_and_nothing_is_copied(private, tmp_path, work_dir,
                                                                          resource_type, operation, which):
    names: dict[str, str] = {}

    def drop(entry):
        return (entry.resource_type, entry.operation, entry.resource_name) == (resource_type, operation, names[which])

    original_unique = private.unique

    def unique(prefix):  # learn the names secure_migration will use before the grant is made
        value = original_unique(prefix)
        if prefix == "rbmiss":
            names.update(topic=f"{value}.t1", group=f"{value}-g", state=f"kafka-ferry.{value}.state.rollback")
        return value

    private.unique = unique
    try:
        m = promoted_with_writes(private, tmp_path, work_dir, "rbmiss", drop=drop)
    finally:
        private.unique = original_unique
    spec, store = m["spec"], m["store"]
    assert rollback_internal_topics(spec)[0] == names["state"]
    source = kafka_cluster(LP_SOURCE)
    runner = RollbackRunner(spec, source, m["destination"], store, work_dir=work_dir, quiesce_window_s=1)
    wanted = f"grant ALLOW {operation} on {resource_type} '{names[which]}' for {m['principal']}"
    assert any(wanted[len("grant "):] in line for line in runner.plan()["acls"]["missing"])  # the dry run says so

    with pytest.raises(RollbackAclsMissing) as failure:
        runner.run()

    assert isinstance(failure.value, Permanent)  # fails once: no retry grants an ACL
    assert wanted in str(failure.value), str(failure.value)
    assert str(failure.value).count("grant ") == 1  # only the missing one
    assert rb.steps_done(store, runner.promoted_at_ms) == []  # not even the quiesce ran
    assert names["state"] not in private.cluster("source").list_topic_names()  # no copy-back topic made
    for (t, q), old in m["before"].items():
        assert read_partition(private, "source", t, q) == old  # nothing copied back
    print(f"missing {operation} on {resource_type}: {failure.value}")

    create_acls(private.cluster("source"), [e for e in m["rollback_acls"].source if drop(e)])  # granted now
    assert runner.run()["status"] == "rolled-back"  # the refused run left nothing to undo
    for (t, q), old in m["before"].items():
        assert len(read_partition(private, "source", t, q)) == len(old) + PER_PARTITION
