"""The ACL migration on the route a user takes (``acls.migrate``), on the private pair (SASL_SSL, authorizers): the
migration's real DAG run by ``dag.test`` with the conf the trigger form sends, then by the ``kafka-ferry`` command.

One migration, built once (a topic with records, a group committed on the source, ACLs on both on the source), then:
a dry run of the never-run migration shows the ACL diff in ``migrate_acls``'s result and creates nothing (no ACL,
no state topic); a catch-up creates the ACLs and records them (``acl-migration``, keyed by the run id); a second
catch-up creates nothing and records nothing; ``kafka-ferry dry-run`` shows an ACL added on the source since as
``+`` and creates it nowhere."""

from __future__ import annotations

import pytest
from route_support import Workspace, form_conf, states
from scenarios import commit_source_group, seed_plain, write_spec

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.acls.acl_record import entry_of
from kafka_ferry.core.common.state_records import ACL_MIGRATION_KIND
from kafka_ferry.kafka.acls import create_acls, describe_acls
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark, pytest.mark.long]

PROVISIONING = ("provision_topics", "provision_groups", "migrate_acls")


@pytest.fixture(scope="module")
def route(private, tmp_path_factory):
    """The migration, its workspace, and each run's result and the destination's ACLs after it (runs in order)."""
    tmp = tmp_path_factory.mktemp("aclroute")
    p = private.unique("aclroute")
    topic = private.create_topic("source", f"{p}.t", 1)
    seed_plain(private, topic, 1, 5)
    group = f"{p}-g"
    commit_source_group(private, group, {(topic, 0): 2})
    spec_path = write_spec(tmp, private, p, acls={"migrate": True, "principals": {"User:prod": "User:prod-dst"}})
    create_acls(private.cluster("source"), [
        AclEntry("User:app", "TOPIC", topic, "READ"),
        AclEntry("User:prod", "TOPIC", topic, "WRITE"),
        AclEntry("User:app", "GROUP", group, "READ"),
    ])
    ws = Workspace(tmp, spec_path)
    destination = private.cluster("destination")
    state_topic = ws.spec.state_topic_name

    def seen() -> dict:
        found = describe_acls(destination, "TOPIC", topic) + describe_acls(destination, "GROUP", group)
        return {"acls": sorted(found), "state_topic": state_topic in destination.list_topic_names()}

    runs: dict = {"before": seen(), "topic": topic, "group": group, "ws": ws, "state_topic": state_topic}
    try:
        for name, mode in (("dry", "dry-run"), ("first", "catch-up"), ("second", "catch-up")):
            runs[name] = ws.dag_test(form_conf(mode))
            runs[f"after {name}"] = seen()
        yield runs
    finally:
        ws.close()


def records(private, route) -> dict:
    return MigrationStateStore(private.cluster("destination"), route["state_topic"]).read_kind(ACL_MIGRATION_KIND)


def test_a_dry_run_of_a_never_run_migration_shows_the_acl_diff_and_changes_nothing(route):
    dry = route["dry"]
    assert dry["state"] == "success", (states(dry), dry["log"][-4000:])
    assert states(dry)["migrate_acls"] == "success"
    topic = route["topic"]
    result = dry["acls"]
    assert result["dry_run"] is True and result["create"] == 2, result
    # the topic's ACLs, the principal renamed; the group's show once provision_groups recorded it (the first run)
    assert f"+ ALLOW READ on TOPIC '{topic}' for User:app" in result["diff"], result["diff"]
    assert f"+ ALLOW WRITE on TOPIC '{topic}' for User:prod-dst" in result["diff"], result["diff"]
    assert route["after dry"] == route["before"] == {"acls": [], "state_topic": False}  # no ACL, no state topic


def test_a_catch_up_creates_the_acls_before_the_mode_and_records_them_under_its_run_id(private, route):
    first = route["first"]
    assert first["state"] == "success", (states(first), first["log"][-4000:])
    assert all(states(first)[t] == "success" for t in PROVISIONING), states(first)
    assert states(first)["translate_offsets"] == "success"
    topic, group = route["topic"], route["group"]
    expected = sorted([AclEntry("User:app", "TOPIC", topic, "READ"), AclEntry("User:prod-dst", "TOPIC", topic, "WRITE"),
                       AclEntry("User:app", "GROUP", group, "READ")])
    assert route["after first"]["acls"] == expected
    assert first["acls"]["dry_run"] is False and first["acls"]["create"] == 3
    [(run_id, record)] = records(private, route).items()
    assert run_id == first["run_id"]  # the DAG run's id
    assert sorted(entry_of(row) for row in record["created"]) == expected
    assert (record["present"], record["refused"]) == (0, [])


def test_a_second_catch_up_creates_nothing_and_records_nothing(private, route):
    second = route["second"]
    assert second["state"] == "success", (states(second), second["log"][-4000:])
    assert (second["acls"]["create"], second["acls"]["present"]) == (0, 3), second["acls"]
    assert route["after second"] == route["after first"]
    assert len(records(private, route)) == 1  # the first run's record only


def test_kafka_ferry_dry_run_shows_a_new_source_acl_and_creates_it_nowhere(private, route):
    topic = route["topic"]
    added = AclEntry("User:audit", "TOPIC", topic, "DESCRIBE")
    create_acls(private.cluster("source"), [added])
    before = records(private, route)
    done = route["ws"].cli("dry-run", route["ws"].spec_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "ACLs: would create 1" in done.stdout, done.stdout[-4000:]
    assert f"ACLs: + {added.describe()}" in done.stdout, done.stdout[-4000:]
    destination = private.cluster("destination")
    assert sorted(describe_acls(destination, "TOPIC", topic) + describe_acls(destination, "GROUP", route["group"])) \
        == route["after second"]["acls"]  # the new one is not there: a dry run creates nothing
    assert records(private, route) == before


def test_kafka_ferry_acls_lists_the_grants_the_acl_migration_needs(route):
    """The private pair's connections are the admin's: the listing names that principal's cluster grants."""
    done = route["ws"].cli("acls", route["ws"].spec_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    lines = done.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("acls.migrate is on")))
    extra = [line.strip() for line in lines[at + 1:at + 4]]
    assert [line.split(" for ")[0] for line in extra] == [
        "source: ALLOW DESCRIBE on CLUSTER 'kafka-cluster'", "destination: ALLOW DESCRIBE on CLUSTER 'kafka-cluster'",
        "destination: ALLOW ALTER on CLUSTER 'kafka-cluster'"], done.stdout
    assert all(f"  {line}" in lines[:at] for line in extra)  # in the catch-up's minimum too
