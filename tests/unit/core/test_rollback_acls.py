"""A rollback's ACLs (``acl_plan.rollback_acls``): every entry pinned, with its reason, narrow and apart from the
catch-up's minimum."""

from __future__ import annotations

from pathlib import Path

from test_acl_plan import spec

from kafka_ferry.core.acls.acl_plan import AclEntry, minimum_acls, rollback_acls, rollback_internal_topics

PACKAGE = Path(__file__).resolve().parents[3] / "plugins" / "kafka_ferry"
INTERNAL_OPS = ("CREATE", "DESCRIBE_CONFIGS", "WRITE")  # DESCRIBE and READ on them: in the minimum


def test_a_whole_rollback_needs_write_on_its_topics_read_on_its_groups_and_its_own_two_source_topics():
    acls = rollback_acls(spec(), "User:s", ["orders.b", "orders.a", "orders.a"], ["g2", "g1"])
    state, syncs = "kafka-ferry.m1.state.rollback", "mm2-offset-syncs.a.internal"
    assert rollback_internal_topics(spec()) == (state, syncs)
    assert list(acls.source) == [
        AclEntry("User:s", "TOPIC", "orders.a", "WRITE"),
        AclEntry("User:s", "TOPIC", "orders.b", "WRITE"),
        AclEntry("User:s", "GROUP", "g1", "READ"),
        AclEntry("User:s", "GROUP", "g2", "READ"),
        *(AclEntry("User:s", "TOPIC", state, op) for op in INTERNAL_OPS),
        *(AclEntry("User:s", "TOPIC", syncs, op) for op in INTERNAL_OPS),
    ]
    reasons = {(e.resource_name, e.operation): acls.reasons[e] for e in acls.source}
    assert "copy back" in reasons[("orders.a", "WRITE")] and "IDEMPOTENT_WRITE" in reasons[("orders.a", "WRITE")]
    assert "commit" in reasons[("g1", "READ")]
    assert "progress" in reasons[(state, "WRITE")] and "offset syncs" in reasons[(syncs, "CREATE")]
    assert acls.lines()[0] == ("source: ALLOW WRITE on TOPIC 'orders.a' for User:s (copy back the records produced "
                               "on the destination after the cutover (idempotent producer: WRITE implies "
                               "IDEMPOTENT_WRITE since Kafka 2.8))")


def test_a_rollback_grant_is_literal_and_never_wider_than_the_named_topics_and_groups():
    acls = rollback_acls(spec(topics={"include": ["orders.*"], "rename": {"policy": "prefix", "prefix": "x."}}),
                         "User:s", ["orders.a"], ["g"])
    assert all(e.pattern_type == "LITERAL" and e.permission == "ALLOW" and e.host == "*" for e in acls.source)
    assert not any("*" in e.resource_name or e.resource_type == "CLUSTER" for e in acls.source)
    assert {e.principal for e in acls.source} == {"User:s"}
    assert not any(e.resource_name.startswith("x.") for e in acls.source)  # the mirrors are the destination's


def test_a_staged_group_rollback_needs_only_read_on_that_group():
    acls = rollback_acls(spec(), "User:s", [], ["g"])
    assert acls.source == (AclEntry("User:s", "GROUP", "g", "READ"),)  # nothing copied back: no copy-back topics


def test_the_rollback_acls_stay_out_of_the_catch_up_minimum():
    """The decision: WRITE on the source's topics and commits on its groups only for a rollback."""
    minimum = minimum_acls(spec(), "User:s", "User:d", ["orders.a"], ["g"])
    rollback = rollback_acls(spec(), "User:s", ["orders.a"], ["g"])
    assert not set(rollback.source) & set(minimum.source)
    assert not any(e.operation in ("WRITE", "CREATE") for e in minimum.source)


def test_the_minimum_reads_the_copy_back_topics_so_revoking_the_rollback_acls_keeps_them_visible():
    """After a rollback, catch-ups, promotions and group rollbacks read the copy-back's progress and syncs on the
    source; revoking the rollback's ACLs must not hide them (a hidden topic reads as "no rollback ran")."""
    minimum = minimum_acls(spec(), "User:s", "User:d", ["orders.a"], ["g"])
    rollback = rollback_acls(spec(), "User:s", ["orders.a"], ["g"])
    for name in rollback_internal_topics(spec()):
        kept = {e.operation for e in minimum.source if e.resource_type == "TOPIC" and e.resource_name == name}
        revoked = {e.operation for e in rollback.source if e.resource_name == name}
        assert kept == {"DESCRIBE", "READ"} and revoked == {"CREATE", "DESCRIBE_CONFIGS", "WRITE"}
        assert kept | revoked == {"CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "WRITE", "READ"}  # all the copy-back uses
    state, syncs = rollback_internal_topics(spec())
    assert f"source: ALLOW DESCRIBE on TOPIC '{state}' for User:s" in minimum.lines()  # what `kafka-ferry acls` prints
    assert f"source: ALLOW READ on TOPIC '{syncs}' for User:s" in minimum.lines()


def test_the_rollback_writes_the_source_topics_the_acls_name():
    """The names the code writes on the source are the ones granted (a rename there would need a new grant)."""
    from kafka_ferry.state.rollback import copy_back_state_topic

    rollback = (PACKAGE / "promotion" / "rollback.py").read_text()
    assert copy_back_state_topic(spec()) == rollback_internal_topics(spec())[0]  # one name: the spec's
    assert "offset_syncs_topic(self.spec.source.alias)" in rollback
