"""Fences own only what they put, on real authorizers (the SASL private pair).

An admin had revoked a reader's access to a group with a literal DENY READ (a prefixed ALLOW remained). The
fence a migration puts on that group is the same binding: it must not be recorded as the migration's, so the
promotion's lift leaves it, and the reader stays revoked. A source DENY the ACL migration brings over after the
fence put the same binding becomes the tenant's. A mirror any principal may write through an ALLOW for `User:*`
cannot be fenced without denying the migration too: the fence is refused, naming that ALLOW.
"""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka import KafkaError
from scenarios import provision, provision_groups
from staged_support import wait_until
from test_fences import _consume_error
from test_least_privilege import LP_DESTINATION, LP_SOURCE, secure_migration

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.common.state_records import FENCE_KIND
from kafka_ferry.hooks.kafka_cluster import kafka_cluster
from kafka_ferry.kafka.acls import create_acls, describe_acls
from kafka_ferry.operators.provision import MigrationPreflightOperator
from kafka_ferry.promotion.steps import PromotionRunner
from kafka_ferry.provision.acls import migrate_acls
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration


def test_a_deny_that_existed_before_survives_fencing_and_the_promotions_lift(private, tmp_path, work_dir):
    m = secure_migration(private, tmp_path, "fown", acls={"fence": True})
    group, topics, p = m["group"], m["topics"], m["p"]
    destination = private.cluster("destination")
    users = {name: private.create_principal("destination", f"{p}-{name}") for name in ("revoked", "reader")}
    config = {name: private.sasl_config("destination", *users[name]) for name in users}
    revoked, reader = (f"User:{users[name][0]}" for name in ("revoked", "reader"))
    admins_deny = AclEntry(revoked, "GROUP", group, "READ", permission="DENY")
    create_acls(destination, [
        *(AclEntry(who, "TOPIC", p, "READ", pattern_type="PREFIXED") for who in (revoked, reader)),
        *(AclEntry(who, "GROUP", p, "READ", pattern_type="PREFIXED") for who in (revoked, reader)),
        admins_deny,  # the admin revoked this principal on the group; its prefixed ALLOW remained
    ])

    assert MigrationPreflightOperator(task_id="pf", spec_path=m["spec_path"]).execute({})["fencing"] == "on"
    provision(m["spec_path"])
    assert _consume_error(config["revoked"], group, topics[0]).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    fences = provision_groups(m["spec_path"])["fences"]
    assert f"{admins_deny.describe()} (put by someone else: left alone)" in fences[f"GROUP:{group}"]
    reader_fence = AclEntry(reader, "GROUP", group, "READ", permission="DENY")
    assert reader_fence.describe() in fences[f"GROUP:{group}"]
    store = MigrationStateStore(kafka_cluster(LP_DESTINATION), m["spec"].state_topic_name)
    recorded = [AclEntry(**e) for e in store.read_kind(FENCE_KIND)[f"GROUP:{group}"]["entries"]]
    assert recorded == [reader_fence]  # only what the fence put
    assert _consume_error(config["reader"], group, topics[0]).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    provision_groups(m["spec_path"])  # a rerun owns the same, and still not the admin's DENY
    assert [AclEntry(**e) for e in store.read_kind(FENCE_KIND)[f"GROUP:{group}"]["entries"]] == [reader_fence]

    promoted = PromotionRunner(m["spec"], kafka_cluster(LP_SOURCE), kafka_cluster(LP_DESTINATION), store,
                               work_dir=work_dir).run()

    assert promoted["status"] == "promoted"
    assert store.read_kind(FENCE_KIND) == {}
    assert admins_deny in describe_acls(destination, "GROUP", group, pattern_type="LITERAL")
    assert reader_fence not in describe_acls(destination, "GROUP", group, pattern_type="LITERAL")
    assert _consume_error(config["reader"], group, topics[0]) is None  # its fence was lifted
    assert _consume_error(config["revoked"], group, topics[0]).code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_a_fence_that_would_need_a_wildcard_deny_is_refused_naming_the_allow(private, tmp_path):
    m = secure_migration(private, tmp_path, "fwild", acls={"fence": True})
    destination = private.cluster("destination")
    everyone = AclEntry("User:*", "TOPIC", m["p"], "WRITE", pattern_type="PREFIXED")
    create_acls(destination, [everyone])
    # a broker answers describe from its own ACL cache, which a new binding reaches a moment after create returns
    wait_until(lambda: everyone in describe_acls(destination), "the wildcard ALLOW visible to describe", 60)
    acls_before = describe_acls(destination)

    with pytest.raises(AirflowFailException) as at_preflight:  # refused before anything changes
        MigrationPreflightOperator(task_id="pf", spec_path=m["spec_path"]).execute({})
    provision(m["spec_path"])  # (a run past pre-flight: the fencing task refuses as well)
    with pytest.raises(AirflowFailException) as refused:
        provision_groups(m["spec_path"])

    for message in (str(at_preflight.value), str(refused.value)):
        assert everyone.describe() in message and "DENY WRITE for User:*" in message
        assert "ALLOWs naming each principal" in message and "acls.fence: false" in message
    assert describe_acls(destination) == acls_before  # no DENY for anyone, the migration's principal included
    store = MigrationStateStore(kafka_cluster(LP_DESTINATION), m["spec"].state_topic_name)
    assert store.read_kind(FENCE_KIND) == {}


def test_a_source_deny_the_acl_migration_keeps_is_no_longer_the_fences_and_survives_the_lift(
        private, tmp_path, work_dir):
    """Fenced first, ACLs migrated after: the source's DENY is the very binding the fence put. The ACL migration
    takes it over (the fence record lets go of it), so the promotion's lift leaves it."""
    m = secure_migration(private, tmp_path, "facl", acls={"fence": True})
    group, topics, p = m["group"], m["topics"], m["p"]
    user = private.create_principal("destination", f"{p}-denied")
    denied = f"User:{user[0]}"
    create_acls(private.cluster("destination"), [AclEntry(denied, "TOPIC", p, "READ", pattern_type="PREFIXED"),
                                                 AclEntry(denied, "GROUP", p, "READ", pattern_type="PREFIXED")])
    source_deny = AclEntry(denied, "GROUP", group, "READ", permission="DENY")
    create_acls(private.cluster("source"), [source_deny])
    provision(m["spec_path"])
    provision_groups(m["spec_path"])
    store = MigrationStateStore(kafka_cluster(LP_DESTINATION), m["spec"].state_topic_name)
    assert source_deny in [AclEntry(**e) for e in store.read_kind(FENCE_KIND)[f"GROUP:{group}"]["entries"]]

    plan = migrate_acls(m["spec"], private.cluster("source"), private.cluster("destination"), store)

    assert source_deny in plan.present  # the fence put it; the migration of ACLs wants it for good
    assert source_deny not in [AclEntry(**e) for record in store.read_kind(FENCE_KIND).values()
                               for e in record["entries"]]
    promoted = PromotionRunner(m["spec"], kafka_cluster(LP_SOURCE), kafka_cluster(LP_DESTINATION), store,
                               work_dir=work_dir).run()
    assert promoted["status"] == "promoted"
    assert source_deny in describe_acls(private.cluster("destination"), "GROUP", group, pattern_type="LITERAL")
    config = private.sasl_config("destination", *user)
    assert _consume_error(config, group, topics[0]).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
