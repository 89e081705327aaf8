"""ACL migration against real authorizers: renamed, literal, denials carried, merged principals refused,
dry run changes nothing, a second run creates nothing; what the migration created, found and refused is recorded in
the state topic (kind ``acl-migration``) by the run that did it, not by the dry run nor by the second run."""

from __future__ import annotations

import pytest
import yaml
from scenarios import commit_source_group, provision, provision_groups

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.acls.acl_record import entry_of
from kafka_ferry.core.common.state_records import ACL_MIGRATION_KIND
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.kafka.acls import create_acls, describe_acls
from kafka_ferry.operators.acls import MigrateAclsOperator
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration


def test_acls_of_migrated_topics_and_groups_are_migrated_without_widening(private, tmp_path):
    p = private.unique("aclmig")
    m1, m2 = (private.create_topic("source", f"{p}.m{i}", 1) for i in (1, 2))
    other = private.create_topic("source", f"{p}.x", 1)  # not selected by the spec
    group = f"{p}-g"
    commit_source_group(private, group, {(m1, 0): 0})
    spec_path = tmp_path / "acl.yaml"
    spec_path.write_text(yaml.safe_dump({
        "name": p, "tenant": "t",
        "source": {"connection_id": private.SOURCE_CONN, "alias": "src"},
        "destination": {"connection_id": private.DESTINATION_CONN, "alias": "dst"},
        "topics": {"include": [f"{p}\\.m.*"], "rename": {"policy": "prefix", "prefix": "dst."}},
        "groups": {"include": [f"{p}-.*"]},
        "acls": {"principals": {"User:prod": "User:prod-dst", "User:a": "User:merged", "User:b": "User:merged"}},
    }))
    provision(str(spec_path))
    provision_groups(str(spec_path))
    source_acls = [
        AclEntry("User:app", "TOPIC", m1, "READ"),
        AclEntry("User:prod", "TOPIC", f"{p}.", "WRITE", pattern_type="PREFIXED"),  # covers m1, m2 and x
        AclEntry("User:app", "TOPIC", f"{p}.m", "READ", pattern_type="PREFIXED"),
        AclEntry("User:app", "TOPIC", m2, "READ", permission="DENY"),
        AclEntry("User:app", "GROUP", group, "READ"),
        AclEntry("User:a", "TOPIC", m1, "READ"),  # User:b may not: merging both into User:merged would widen
        AclEntry("User:b", "TOPIC", other, "READ"),
    ]
    create_acls(private.cluster("source"), source_acls)
    d1, d2 = f"dst.{m1}", f"dst.{m2}"
    expected = sorted([
        AclEntry("User:app", "TOPIC", d1, "READ"),
        AclEntry("User:prod-dst", "TOPIC", d1, "WRITE"),
        AclEntry("User:prod-dst", "TOPIC", d2, "WRITE"),
        AclEntry("User:app", "TOPIC", d2, "READ"),
        AclEntry("User:app", "TOPIC", d2, "READ", permission="DENY"),
        AclEntry("User:app", "GROUP", group, "READ"),
    ])

    def on_destination():
        found = []
        for resource_type, name in (("TOPIC", d1), ("TOPIC", d2), ("TOPIC", f"dst.{other}"), ("GROUP", group)):
            found += describe_acls(private.cluster("destination"), resource_type, name)
        return sorted(found)

    store = MigrationStateStore(private.cluster("destination"), load_spec(spec_path).state_topic_name)
    dry = MigrateAclsOperator(task_id="acls", spec_path=str(spec_path), dry_run=True).execute({"run_id": "dry"})
    assert on_destination() == []  # a dry run changes nothing
    assert store.read_kind(ACL_MIGRATION_KIND) == {}  # nor records anything
    assert dry["create"] == len(expected) and dry["refused"] == 1
    assert any(line.startswith("! refused ALLOW READ on TOPIC") and "User:merged" in line and "User:b" in line
               for line in dry["diff"]), dry["diff"]

    first = MigrateAclsOperator(task_id="acls", spec_path=str(spec_path)).execute({"run_id": "first"})
    assert on_destination() == expected
    records = store.read_kind(ACL_MIGRATION_KIND)
    assert list(records) == ["first"]
    assert [entry_of(row) for row in records["first"]["created"]] == expected  # read back from the broker's answer
    assert records["first"]["present"] == 0
    [refusal] = records["first"]["refused"]
    assert entry_of(refusal["entry"]) == AclEntry("User:merged", "TOPIC", d1, "READ")
    assert "User:b" in refusal["reason"], refusal
    again = MigrateAclsOperator(task_id="acls", spec_path=str(spec_path)).execute({"run_id": "again"})
    assert store.read_kind(ACL_MIGRATION_KIND) == records  # nothing created, the same refusal: no record

    assert (first["create"], first["refused"]) == (len(expected), 1)
    assert (again["create"], again["present"], again["refused"]) == (0, len(expected), 1)
    assert on_destination() == expected  # idempotent; nothing PREFIXED, nothing for the unselected topic
    print("ACL migration diff:\n  " + "\n  ".join(dry["diff"]))


def test_a_create_the_broker_refuses_in_part_reports_what_it_created(private):
    """Kafka answers each binding of a CreateAcls on its own: one created, one refused (a principal it cannot parse);
    ``create_acls`` raises naming the refused one and carries the created one, which ``migrate_acls`` records."""
    from kafka_ferry.kafka.acls import AclsPartlyCreated, delete_acls

    p = private.unique("aclpart")
    destination = private.cluster("destination")
    good, bad = AclEntry("User:app", "TOPIC", p, "READ"), AclEntry("no-colon", "TOPIC", p, "READ")
    try:
        with pytest.raises(AclsPartlyCreated, match="create ACL ALLOW READ on TOPIC .* for no-colon failed") as raised:
            create_acls(destination, [good, bad])
        assert raised.value.created == (good,)
        assert describe_acls(destination, "TOPIC", p) == [good]
    finally:
        delete_acls(destination, [good])


def test_acl_migration_as_least_privilege_principals_a_missing_grant_fails_once_naming_it(private, tmp_path):
    """``acls.migrate``: the migration's principals hold ``minimum_acls`` (with the ACL migration's cluster grants) but
    the source's DESCRIBE on the cluster. ``migrate_acls`` fails once (AirflowFailException: no retry), naming that
    grant and ``acls.migrate: false``, and creates nothing; granted, it migrates the topics' and group's ACLs."""
    from airflow.sdk.exceptions import AirflowFailException
    from test_least_privilege import secure_migration

    from kafka_ferry.core.acls.acl_plan import CLUSTER_RESOURCE

    # every grant but DESCRIBE on the source cluster
    m = secure_migration(private, tmp_path, "aclgrant", acls={"migrate": True},
                         grant_filter=lambda side, e: (side, e.resource_type) != ("source", "CLUSTER"))
    source_user, destination_user = (f"User:{m['users'][side][0]}" for side in ("source", "destination"))
    assert AclEntry(destination_user, "CLUSTER", CLUSTER_RESOURCE, "ALTER") in m["acls"].destination
    provision(m["spec_path"])
    provision_groups(m["spec_path"])  # as the least-privilege principals: the copy's minimum is enough for these
    on_source = [AclEntry("User:app", "TOPIC", t, "READ") for t in m["topics"]]
    create_acls(private.cluster("source"), [*on_source, AclEntry("User:app", "GROUP", m["group"], "READ")])

    def on_destination():
        found = describe_acls(private.cluster("destination"), "GROUP", m["group"])
        for t in m["topics"]:
            found += describe_acls(private.cluster("destination"), "TOPIC", t)
        return sorted(e for e in found if e.principal == "User:app")

    with pytest.raises(AirflowFailException) as failed:
        MigrateAclsOperator(task_id="acls", spec_path=m["spec_path"]).execute({"run_id": "refused"})
    message = str(failed.value)
    assert f"grant ALLOW DESCRIBE on CLUSTER '{CLUSTER_RESOURCE}' for {source_user}" in message, message
    assert "nothing was changed" in message and "set acls.migrate: false" in message, message
    assert on_destination() == []

    create_acls(private.cluster("source"), [AclEntry(source_user, "CLUSTER", CLUSTER_RESOURCE, "DESCRIBE")])
    done = MigrateAclsOperator(task_id="acls", spec_path=m["spec_path"]).execute({"run_id": "granted"})
    assert done["dry_run"] is False and on_destination() == sorted(
        [*on_source, AclEntry("User:app", "GROUP", m["group"], "READ")])
