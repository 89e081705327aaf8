"""ACL values: the least-privilege set per side, grant hints, fences."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.acls.acl_plan import (
    READER_GROUPS,
    AclEntry,
    FenceRefused,
    acl_migration_acls,
    fence_to_own,
    grant_hint_for_code,
    group_read_fence,
    group_readers,
    minimum_acls,
    principal_of,
    topic_write_fence,
)
from kafka_ferry.core.specs.spec import parse_spec

PACKAGE = Path(__file__).resolve().parents[3] / "plugins" / "kafka_ferry"


def spec(**overrides):
    doc = {"name": "m1", "tenant": "t", "source": {"connection_id": "src", "alias": "a"},
           "destination": {"connection_id": "dst", "alias": "b"}, "topics": {"include": ["orders.*"]}}
    doc.update(overrides)
    return parse_spec(doc)


def test_minimum_acls_are_literal_per_topic_and_group_and_never_on_the_cluster():
    acls = minimum_acls(spec(topics={"include": ["o.*"], "rename": {"policy": "prefix", "prefix": "x."}}),
                        "User:s", "User:d", ["o1", "o2"], ["g"])
    everything = acls.source + acls.destination
    assert all(e.pattern_type == "LITERAL" and e.permission == "ALLOW" for e in everything)
    assert not any(e.resource_type == "CLUSTER" or "*" in e.resource_name for e in everything)
    assert {e.principal for e in acls.source} == {"User:s"} and {e.principal for e in acls.destination} == {"User:d"}
    source_topics = {(e.resource_name, e.operation) for e in acls.source if e.resource_type == "TOPIC"}
    copy_back = ("kafka-ferry.m1.state.rollback", "mm2-offset-syncs.a.internal")  # read after a rollback
    assert source_topics == ({(t, op) for t in ("o1", "o2") for op in ("DESCRIBE", "DESCRIBE_CONFIGS", "READ")}
                             | {(t, op) for t in copy_back for op in ("DESCRIBE", "READ")})
    assert AclEntry("User:d", "TOPIC", "x.o1", "WRITE") in acls.destination
    assert AclEntry("User:d", "TOPIC", "o1", "WRITE") not in acls.destination  # renamed: only the mirror
    assert AclEntry("User:d", "GROUP", "g", "READ") in acls.destination  # commits translated offsets
    assert AclEntry("User:s", "GROUP", "g", "READ") not in acls.source  # the source group is only described
    internal = {e.resource_name for e in acls.destination if e.operation == "CREATE"} - {"x.o1", "x.o2"}
    assert internal == {"kafka-ferry.m1.state", "a.checkpoints.internal", "mm2-offset-syncs.b.internal", "heartbeats",
                        "a.heartbeats"}


def test_offset_syncs_are_granted_on_the_destination_only():
    acls = minimum_acls(spec(), "User:s", "User:d", ["orders"], [])
    assert AclEntry("User:d", "TOPIC", "mm2-offset-syncs.b.internal", "WRITE") in acls.destination
    assert not any(e.resource_name == "mm2-offset-syncs.b.internal" for e in acls.source)


def test_every_reader_group_of_the_code_is_granted():
    """The tool's consumers name literal group ids; each needs DESCRIBE (coordinator lookup), so each is listed."""
    literals = set()
    for path in PACKAGE.rglob("*.py"):
        literals |= set(re.findall(r'"group\.id":\s*"([^"]+)"', path.read_text()))
    assert literals and literals <= set(READER_GROUPS)


def test_principal_comes_from_the_username_never_the_password():
    config = {"security.protocol": "SASL_SSL", "sasl.username": "mig", "sasl.password": "s3cret"}
    assert principal_of(config) == "User:mig"
    assert principal_of({"bootstrap.servers": "x:1"}) == "User:ANONYMOUS"
    assert principal_of({"security.protocol": "SSL"}) is None  # a certificate's DN: unknown here


def test_grant_hint_names_operation_resource_and_principal_for_authorization_codes_only():
    hint = grant_hint_for_code(29, "User:mig", {"TOPIC": ("WRITE", "orders"), "GROUP": ("READ", "g")})
    assert hint == "grant ALLOW WRITE on TOPIC 'orders' for User:mig"
    assert grant_hint_for_code(30, "User:mig", {"TOPIC": ("WRITE", "orders"), "GROUP": ("READ", "g")}) == (
        "grant ALLOW READ on GROUP 'g' for User:mig")
    cluster_hint = grant_hint_for_code(31, None, {"CLUSTER": ("ALTER", "")})
    assert cluster_hint is not None and "CLUSTER 'kafka-cluster'" in cluster_hint
    assert grant_hint_for_code(29, "User:mig", None) is None  # no guess when the call did not say
    assert grant_hint_for_code(3, "User:mig", {"TOPIC": ("WRITE", "orders")}) is None


def test_group_fence_denies_read_to_each_consumer_principal():
    assert group_read_fence("g", ["User:b", "User:a", "User:a"]) == (
        AclEntry("User:a", "GROUP", "g", "READ", permission="DENY"),
        AclEntry("User:b", "GROUP", "g", "READ", permission="DENY"))


PRINCIPALS = st.sampled_from(["User:mig", "User:app", "User:ops", "User:*"])
ENTRIES = st.builds(AclEntry, PRINCIPALS, st.sampled_from(["TOPIC", "GROUP"]),
                    st.sampled_from(["orders", "ord", "o", "other", "*"]), st.sampled_from(["WRITE", "ALL", "READ"]),
                    st.sampled_from(["ALLOW", "DENY"]), st.sampled_from(["LITERAL", "PREFIXED"]))


@given(st.lists(ENTRIES, max_size=12))
def test_write_fence_denies_every_other_writer_and_never_the_migration(existing):
    writers = {e.principal for e in existing if e.permission == "ALLOW" and e.operation in ("WRITE", "ALL")
               and e.covers("TOPIC", "orders")}
    if "User:*" in writers:  # its only fence would deny everyone, the migration too: refused, naming the ALLOW
        with pytest.raises(FenceRefused, match=r"cannot fence TOPIC 'orders': ALLOW (WRITE|ALL) on TOPIC .* User:\*"):
            topic_write_fence("orders", "User:mig", existing)
        return
    fence = topic_write_fence("orders", "User:mig", existing)
    denied = {e.principal for e in fence}
    assert denied == writers - {"User:mig"}
    assert "User:*" not in denied
    assert all((e.resource_type, e.resource_name, e.operation, e.permission, e.pattern_type)
               == ("TOPIC", "orders", "WRITE", "DENY", "LITERAL") for e in fence)


@given(st.lists(ENTRIES, max_size=12))
def test_group_readers_are_every_other_principal_allowed_to_read_the_group(existing):
    allowed = {e.principal for e in existing if e.permission == "ALLOW"
               and e.operation in ("READ", "ALL") and e.covers("GROUP", "orders")}
    if "User:*" in allowed:
        with pytest.raises(FenceRefused, match=r"cannot fence GROUP 'orders'"):
            group_readers("orders", "User:mig", existing)
        return
    readers = group_readers("orders", "User:mig", existing)
    assert readers == sorted(allowed - {"User:mig"})
    assert all(e.operation == "READ" and e.permission == "DENY"
               for e in group_read_fence("orders", readers))


def test_fencing_adds_exactly_the_cluster_grants_that_list_create_and_delete_acls():
    plain = minimum_acls(spec(), "User:s", "User:d", ["orders"], ["g"])
    fenced = minimum_acls(spec(acls={"fence": True}), "User:s", "User:d", ["orders"], ["g"])
    assert fenced.source == plain.source
    assert set(fenced.destination) - set(plain.destination) == {
        AclEntry("User:d", "CLUSTER", "kafka-cluster", "DESCRIBE"),
        AclEntry("User:d", "CLUSTER", "kafka-cluster", "ALTER")}


def test_migrating_acls_adds_exactly_the_cluster_grants_that_list_and_create_acls():
    plain = minimum_acls(spec(), "User:s", "User:d", ["orders"], ["g"])
    migrating = minimum_acls(spec(acls={"migrate": True}), "User:s", "User:d", ["orders"], ["g"])
    extra = acl_migration_acls("User:s", "User:d")
    assert set(migrating.source) - set(plain.source) == set(extra.source) == {
        AclEntry("User:s", "CLUSTER", "kafka-cluster", "DESCRIBE")}
    assert set(migrating.destination) - set(plain.destination) == set(extra.destination) == {
        AclEntry("User:d", "CLUSTER", "kafka-cluster", "DESCRIBE"),
        AclEntry("User:d", "CLUSTER", "kafka-cluster", "ALTER")}
    both = minimum_acls(spec(acls={"migrate": True, "fence": True}), "User:s", "User:d", ["orders"], ["g"])
    assert len(both.destination) == len(set(both.destination))  # fences need the same two: listed once


def test_a_fence_that_would_need_a_wildcard_deny_is_refused_naming_the_allow_and_what_to_do():
    wildcard = AclEntry("User:*", "GROUP", "ord", "READ", pattern_type="PREFIXED")
    with pytest.raises(FenceRefused) as refused:
        group_readers("orders", "User:mig", [wildcard, AclEntry("User:app", "GROUP", "orders", "READ")])
    message = str(refused.value)
    assert wildcard.describe() in message  # the ALLOW that would need it
    assert "DENY READ for User:*" in message and "migration's own principal" in message
    assert "ALLOWs naming each principal" in message and "acls.fence: false" in message
    with pytest.raises(FenceRefused, match=re.escape("ALLOW ALL on TOPIC '*' for User:*")):
        topic_write_fence("orders", "User:mig", [AclEntry("User:*", "TOPIC", "*", "ALL")])


def test_only_user_star_is_the_wildcard_a_fence_refuses():
    other_type = AclEntry("Group:*", "TOPIC", "orders", "WRITE")  # a principal named '*' of type Group
    assert topic_write_fence("orders", "User:mig", [other_type]) == (
        AclEntry("Group:*", "TOPIC", "orders", "WRITE", permission="DENY"),)


FENCE_ENTRIES = st.builds(AclEntry, st.sampled_from(["User:a", "User:b", "User:c"]), st.just("GROUP"),
                          st.just("orders"), st.just("READ"), st.just("DENY"))


@given(st.sets(FENCE_ENTRIES), st.sets(FENCE_ENTRIES), st.sets(FENCE_ENTRIES))
def test_a_fence_owns_what_it_recorded_and_what_did_not_exist_never_a_binding_someone_else_put(
        wanted, existing, recorded):
    owned = set(fence_to_own(wanted, existing, recorded))
    assert owned <= wanted
    for e in wanted:
        assert (e in owned) == (e in recorded or e not in existing)
    foreign = existing - recorded
    assert not owned & foreign  # an identical binding that was there before is never the migration's


def test_an_admins_identical_deny_is_not_owned_while_a_recorded_one_stays_owned_on_a_rerun():
    admin = AclEntry("User:x", "GROUP", "g", "READ", permission="DENY")
    ours = AclEntry("User:y", "GROUP", "g", "READ", permission="DENY")
    assert fence_to_own([admin, ours], existing=[admin], recorded=[]) == (ours,)
    assert fence_to_own([admin, ours], existing=[admin, ours], recorded=[ours]) == (ours,)  # second run
    assert fence_to_own([ours], existing=[], recorded=[ours]) == (ours,)  # recorded, then a crash before create
