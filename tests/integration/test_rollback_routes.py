"""The rollback through the routes a user takes (issue 35): a migration promoted with ``mode=promote`` through its real
DAG (``dag.test`` with the conf the trigger form sends), producers (an aborted transaction among them) and a consumer
group run on the destination, then ``{"mode": "rollback", "confirm_migration": name}`` through the same DAG, or the
same through ``kafka-ferry``: every record produced on the destination after the cutover is on the source once, in
order, the aborted ones absent, and the group resumes on the source exactly. With a schema registry (remap) too.

And the two states the issue found a trap in: ``reset-promotion`` while a rollback is possible is refused
(test_cli.py), and a second ``promote`` with a destination group ahead of the translation fails in one try of the
pre-flight, changing nothing, naming ``allow_rewind`` instead of waiting out the ``group_offsets_synced`` sensor."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

import pytest
from route_support import Workspace, form_conf, states, stop_by_pid
from scenarios import (
    commit_source_group,
    consume_some,
    consume_some_subscribed,
    read_on_as_group,
    read_partition,
    remaining,
    seed_plain,
    shape,
    write_spec,
)

from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.promotion.steps import PromotionRunner
from kafka_ferry.state.promotion import promotion_status, reset_promotion
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

PROVISIONING = ("provision_topics", "provision_groups")


def a_migration(clusters, tmp_path, prefix: str):
    """One plain topic (2 partitions, 20 records each) and a group ``<p>-g`` committed mid-way on the source."""
    p = clusters.unique(prefix)
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, 20)
    commit_source_group(clusters, f"{p}-g", {(topic, 0): 8, (topic, 1): 12})
    spec_path = write_spec(tmp_path, clusters, p, promotion={"quiesce_window_seconds": 1, "poke_interval_seconds": 1})
    return p, topic, f"{p}-g", spec_path


def produce_after_cutover(clusters, topic: str) -> None:
    """On the destination: plain records, a committed and an aborted transaction, plain records again."""
    plain = clusters.producer("destination", **{"enable.idempotence": True})
    txn = clusters.producer("destination", **{"transactional.id": f"{topic}-after-cutover"})
    txn.init_transactions(30)
    for q in range(2):
        for i in range(5):
            plain.produce(topic, key=f"d{i}".encode(), value=f"dest-{q}-{i}".encode(), partition=q,
                          headers=[("h", f"{q}-{i}".encode())])
    assert plain.flush(30) == 0
    for outcome in ("commit", "abort"):
        txn.begin_transaction()
        for q in range(2):
            for i in range(3):
                txn.produce(topic, key=b"t", value=f"{outcome}ted-{q}-{i}".encode(), partition=q)
        txn.flush(30)
        (txn.commit_transaction if outcome == "commit" else txn.abort_transaction)(30)
    for q in range(2):
        plain.produce(topic, key=b"late", value=f"late-{q}".encode(), partition=q)
    assert plain.flush(30) == 0


def the_state_a_rollback_starts_from(clusters, topic: str, group: str, consume=consume_some) -> dict:
    """After the cutover: records produced on the destination, the group read some of them and stopped (``consume``:
    how its consumer reads, e.g. ``consume_some_subscribed`` as a member). Returns what the checks compare with."""
    produce_after_cutover(clusters, topic)
    consume(clusters, "destination", group, topic, {0: 15, 1: None})  # into the post-cutover records of 0
    ids = {side: clusters.cluster(side).describe_cluster().cluster_id for side in ("source", "destination")}
    post = {q: [shape(r) for r in read_partition(clusters, "destination", topic, q)
                if read_provenance(r.headers)[0] != ids["source"]] for q in range(2)}
    assert all(len(rows) == 5 + 3 + 1 for rows in post.values())  # plain, the committed transaction, late
    return {"ids": ids, "post": post, "expected": remaining(clusters, "destination", group, topic),
            "own_before": {q: read_partition(clusters, "source", topic, q) for q in range(2)},
            "ends": clusters.cluster("source").list_offsets([(topic, q) for q in range(2)])}


def assert_rolled_back_exactly(clusters, topic: str, group: str, before: dict) -> None:
    for q in range(2):
        records = read_partition(clusters, "source", topic, q)
        own = [r for r in records if read_provenance(r.headers)[0] != before["ids"]["destination"]]
        back = [shape(r) for r in records if read_provenance(r.headers)[0] == before["ids"]["destination"]]
        assert own == before["own_before"][q]  # the source's own records untouched
        assert back == before["post"][q]  # each post-cutover record once, in order, as it was
        assert not [r for r in records if r.value and r.value.startswith(b"aborted")]
    # read_uncommitted too: the copy-back never wrote the aborted records, not even as an aborted transaction
    values = [m.value() or b"" for m in uncommitted(clusters, topic)]
    assert not [v for v in values if v.startswith(b"aborted")]
    assert read_on_as_group(clusters, group, topic) == before["expected"], "the group did not resume exactly"


def uncommitted(clusters, topic: str) -> list:
    """Every record of the source topic's 2 partitions as read_uncommitted sees it (aborted records too)."""
    from confluent_kafka import TopicPartition

    ends = clusters.cluster("source").list_offsets([(topic, q) for q in range(2)], "latest")
    consumer = clusters.consumer("source", **{"isolation.level": "read_uncommitted"})
    out = []
    try:
        consumer.assign([TopicPartition(topic, q, 0) for q in range(2)])
        deadline = time.monotonic() + 60
        while any(consumer.position([TopicPartition(topic, q)])[0].offset < ends[(topic, q)] for q in range(2)):
            assert time.monotonic() < deadline, f"source {topic} not read to {ends} in 60 s"
            out += [msg for msg in consumer.consume(500, 0.5) if msg.error() is None]
    finally:
        consumer.close()
    return out


@pytest.mark.timeout(1800)
def test_promote_then_rollback_through_the_dag_as_the_form_sends_them(clusters, tmp_path):
    p, topic, group, spec_path = a_migration(clusters, tmp_path, "rrdag")
    ws = Workspace(tmp_path, spec_path)
    name = ws.spec.name
    caught_up = ws.dag_test(form_conf("catch-up"))  # a migration never copied is refused a promotion (route matrix)
    assert caught_up["state"] == "success", caught_up["log"][-6000:]

    promoted = ws.dag_test(form_conf("promote", name))
    assert promoted["state"] == "success", promoted["log"][-6000:]
    done = states(promoted)
    assert done["promote_reconcile_mark"] == "success" and done["rollback"] == "skipped"
    assert done["plan_copy"] == "skipped" and done["promote_groups"] == "skipped"
    store = MigrationStateStore(clusters.cluster("destination"), ws.spec.state_topic_name)
    status = promotion_status(store)
    assert status is not None and status["status"] == "promoted"

    before = the_state_a_rollback_starts_from(clusters, topic, group)

    # a catch-up now is refused in the pre-flight, once, naming the way back (not reset-promotion)
    refused = ws.dag_test(form_conf("catch-up"))
    assert refused["state"] == "failed" and refused["tasks"]["preflight"] == ["failed", 1]
    assert "kafka-ferry rollback " in refused["log"] and "reset-promotion" not in refused["log"]

    plan = ws.dag_test(form_conf("rollback-plan"))  # the plan: past provisioning, changes nothing
    assert plan["state"] == "success", plan["log"][-6000:]
    assert {t: states(plan)[t] for t in PROVISIONING} == dict.fromkeys(PROVISIONING, "skipped")
    assert plan["rollback"]["records"] == 2 * 9
    assert clusters.cluster("source").list_offsets(list(before["ends"])) == before["ends"]

    rolled = ws.dag_test(form_conf("rollback", name))
    assert rolled["state"] == "success", rolled["log"][-6000:]
    done = states(rolled)
    assert done["preflight"] == "success" and done["rollback"] == "success"
    assert all(done[t] == "skipped" for t in (*PROVISIONING, "plan_copy", "source_quiesced", "promote_groups"))
    assert rolled["rollback"]["status"] == "rolled-back"
    assert promotion_status(store) is None  # the mark is cleared: catch-up runs copy again
    assert_rolled_back_exactly(clusters, topic, group, before)


@pytest.mark.long
@pytest.mark.timeout(2400)
def test_promote_then_rollback_through_the_dag_with_kip848_consumer_groups(kip848, tmp_path):
    """The issue's scenario on a 4.x -> 4.x pair whose consumers use KIP-848's protocol (group.protocol=consumer) on
    the destination after the cutover and on the source after the rollback: the groups are consumer groups there."""
    from confluent_kafka import ConsumerGroupType

    clusters = kip848
    p, topic, group, spec_path = a_migration(clusters, tmp_path, "rr848")
    ws = Workspace(tmp_path, spec_path)
    name = ws.spec.name
    caught_up = ws.dag_test(form_conf("catch-up"))
    assert caught_up["state"] == "success", caught_up["log"][-6000:]
    promoted = ws.dag_test(form_conf("promote", name))
    assert promoted["state"] == "success", promoted["log"][-6000:]

    clusters.group_protocol = "consumer"  # from the cutover on, the group's consumers are KIP-848 members
    before = the_state_a_rollback_starts_from(clusters, topic, group, consume=consume_some_subscribed)
    assert group_type(clusters, "destination", group) == ConsumerGroupType.CONSUMER

    rolled = ws.dag_test(form_conf("rollback", name))
    assert rolled["state"] == "success", rolled["log"][-6000:]
    assert states(rolled)["rollback"] == "success" and rolled["rollback"]["status"] == "rolled-back"
    assert_rolled_back_exactly(clusters, topic, group, before)  # read on as a KIP-848 member of the group
    assert group_type(clusters, "source", group) == ConsumerGroupType.CONSUMER


def group_type(clusters, side: str, group: str):
    """The group's type as the broker describes it (classic or consumer, KIP-848)."""
    [described] = clusters.admin(side).describe_consumer_groups([group], request_timeout=30).values()
    return described.result(30).type


@pytest.mark.long
@pytest.mark.timeout(2400)
def test_promote_then_rollback_through_kafka_ferry(clusters, tmp_path):
    p, topic, group, spec_path = a_migration(clusters, tmp_path, "rrcli")
    ws = Workspace(tmp_path, spec_path)
    name = ws.spec.name
    caught_up = ws.cli("run", ws.spec_path)  # a migration never copied is refused a promotion (route matrix)
    assert caught_up.returncode == 0, (caught_up.stdout + caught_up.stderr)[-6000:]

    promote = ws.cli("promote", ws.spec_path, "--yes-i-mean", name)
    assert promote.returncode == 0, (promote.stdout + promote.stderr)[-6000:]
    # the command shows the run's tasks as it waits; which of the promotion's it catches depends on how fast each
    # ends (the final copy with nothing new takes hundredths of a second), so any of them will do
    promotion_tasks = ("source_quiesced", "source_groups_inactive", "replication_lag", "promote_final_copy",
                       "promote_translate_commit", "group_offsets_synced", "promote_reconcile_mark")
    assert any(f"... {task}:" in promote.stdout for task in promotion_tasks), promote.stdout
    before = the_state_a_rollback_starts_from(clusters, topic, group)

    status = ws.cli("status", ws.spec_path)
    assert status.returncode == 0 and "promoted: yes" in status.stdout, status.stdout + status.stderr
    assert f"kafka-ferry rollback {ws.spec_path}" in status.stdout
    assert "(mode promote): success" in status.stdout

    plan = ws.cli("rollback-plan", ws.spec_path)
    assert plan.returncode == 0, (plan.stdout + plan.stderr)[-6000:]
    assert "rollback plan: 18 record(s) to copy back to the source" in plan.stdout, plan.stdout
    assert f"copy back {topic}-0 [" in plan.stdout and f"group {group} resumes on the source at {topic}-0@" \
        in plan.stdout
    assert clusters.cluster("source").list_offsets(list(before["ends"])) == before["ends"]

    unconfirmed = ws.cli("rollback", ws.spec_path, "--yes-i-mean", "other")
    assert unconfirmed.returncode == 2 and "nothing was done" in unconfirmed.stderr
    rolled = ws.cli("rollback", ws.spec_path, "--yes-i-mean", name)
    assert rolled.returncode == 0, (rolled.stdout + rolled.stderr)[-6000:]
    assert "rollback: rolled-back" in rolled.stdout and "... rollback: running" in rolled.stdout, rolled.stdout
    assert_rolled_back_exactly(clusters, topic, group, before)


@pytest.mark.long
@pytest.mark.timeout(2400)
def test_promote_then_rollback_through_the_dag_with_a_remap_registry(clusters, tmp_path, monkeypatch, axon_pair):
    from schema_support import (
        assert_remap_rolled_back,
        produce_remap_on_destination,
        remap_migration,
        stop_remap_on_destination,
    )

    m = remap_migration(clusters, tmp_path, monkeypatch, axon_pair)  # schemas migrated, provisioned: not promoted
    ws = Workspace(tmp_path, m["spec_path"])
    name = ws.spec.name
    caught_up = ws.dag_test(form_conf("catch-up"))  # a migration never copied is refused a promotion (route matrix)
    assert caught_up["state"] == "success", caught_up["log"][-6000:]
    promoted = ws.dag_test(form_conf("promote", name))
    assert promoted["state"] == "success", promoted["log"][-6000:]
    assert states(promoted)["migrate_schemas"] == "success"

    produce_remap_on_destination(clusters, m, m["account"], "d", 12)
    stop_remap_on_destination(clusters, m, {0: 4, 1: None})
    rolled = ws.dag_test(form_conf("rollback", name))
    assert rolled["state"] == "success", rolled["log"][-6000:]
    assert states(rolled)["migrate_schemas"] == "skipped"  # it refuses a promoted migration: never on this route
    assert assert_remap_rolled_back(clusters, m) > 0


@pytest.mark.long
@pytest.mark.timeout(1800)
def test_a_second_promote_with_a_destination_group_ahead_fails_in_the_pre_flight_naming_allow_rewind(clusters,
                                                                                                       tmp_path):
    """Through ``kafka-ferry promote`` and ``kafka-ferry promote-groups`` (the form's conf, routes.GROUP_AHEAD): one
    failed try of the pre-flight, before the final copy, naming the partition and ``--allow-rewind``; both clusters
    as they were, although the source has records the final copy would have copied. Then the way out it named."""
    p, topic, group, spec_path = a_migration(clusters, tmp_path, "rrahead")
    ws = Workspace(tmp_path, spec_path)
    from scenarios import provision, provision_groups, snapshot

    provision(str(ws.spec_path))
    provision_groups(str(ws.spec_path))
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    assert PromotionRunner(ws.spec, source, destination, work_dir=tmp_path / "work").run()["status"] == "promoted"
    consume_some(clusters, "destination", group, topic, {0: 5, 1: 3})  # the group moves on on the destination
    store = MigrationStateStore(destination, ws.spec.state_topic_name)
    reset_promotion(store, give_up_rollback=True)
    moved_on = destination.group_offsets(group)
    seed_plain(clusters, topic, 2, 3, start=100)  # new on the source: a final copy would append them
    before = snapshot(clusters, p)

    for command, names in (("promote", ()), ("promote-groups", (group,))):
        again = ws.cli(command, ws.spec_path, *names, "--yes-i-mean", ws.spec.name)
        out = again.stdout + again.stderr
        assert again.returncode == 1, out[-6000:]
        assert "preflight=failed" in again.stdout and "provision_topics=upstream_failed" in again.stdout, out[-6000:]
        assert "committed past the final translation" in out, out[-6000:]
        assert f"group {group} {topic}-0 committed at {moved_on[(topic, 0)]}, translation 8" in out, out[-6000:]
        assert f"kafka-ferry {command} --allow-rewind" in out and "reset-promotion" not in out, out[-6000:]
        assert snapshot(clusters, p) == before, f"{command} changed a cluster"
    assert destination.group_offsets(group) == moved_on  # nothing committed

    rewound = ws.dag_test(form_conf("promote", ws.spec.name, allow_rewind=True))  # the way out it named
    assert rewound["state"] == "success", rewound["log"][-6000:]
    assert destination.group_offsets(group) == {(topic, 0): 8, (topic, 1): 12}


class LiveMember:
    """A consumer of ``group`` on the source that stays a member (polls, commits nothing) until the block ends."""

    def __init__(self, clusters, group: str, topic: str) -> None:
        self.consumer = clusters.consumer("source", group)
        self.topic, self.stopping = topic, threading.Event()
        self.thread = threading.Thread(target=self._poll, name="live-member", daemon=True)

    def _poll(self) -> None:
        while not self.stopping.is_set():
            self.consumer.poll(0.5)

    def __enter__(self) -> LiveMember:
        self.consumer.subscribe([self.topic])
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stopping.set()
        self.thread.join(30)
        self.consumer.close()


@pytest.mark.long
@pytest.mark.timeout(1500)
def test_status_shows_a_promotion_waiting_in_its_sensor(clusters, tmp_path):
    """While ``kafka-ferry promote`` waits in ``source_groups_inactive`` (a live member of the group on the source),
    ``kafka-ferry status`` shows the run in flight, the waiting task, since when and what it waits for; the command
    itself said so too. Then the run is stopped (by its pid) and the member leaves."""
    p, topic, group, spec_path = a_migration(clusters, tmp_path, "rrwait")
    ws = Workspace(tmp_path, spec_path)
    caught_up = ws.dag_test(form_conf("catch-up"))
    assert caught_up["state"] == "success", caught_up["log"][-6000:]
    # under dag.test a sensor poking in-process stays "queued" in the metadata DB; a scheduler's shows running/waiting
    waiting = re.compile(r"source_groups_inactive: (running|queued|waiting \(\w+\)) since "
                         r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ; "
                         r"waits for the migrated groups to have no members on the source")
    out_path = tmp_path / "promote.out"
    with LiveMember(clusters, group, topic), out_path.open("w") as out:
        promote = subprocess.Popen([sys.executable, "-m", "kafka_ferry.cli", "promote", str(ws.spec_path),
                                    "--yes-i-mean", ws.spec.name], env={**ws.env, "PYTHONUNBUFFERED": "1"}, stdout=out,
                                   stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 600
            while True:
                status = ws.cli("status", ws.spec_path)
                if waiting.search(status.stdout):
                    break
                assert promote.poll() is None, out_path.read_text()[-6000:]
                assert time.monotonic() < deadline, status.stdout + status.stderr
                time.sleep(3)
            while not waiting.search(out_path.read_text()):  # the command says it once it has seen it
                assert promote.poll() is None and time.monotonic() < deadline, out_path.read_text()[-6000:]
                time.sleep(1)
        finally:
            stop_by_pid(promote)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "(mode promote): running, started " in status.stdout, status.stdout
    assert "promoted: no" in status.stdout, status.stdout
    assert "promote_final_copy" not in status.stdout  # never reached: the sensor held the run
    assert not clusters.cluster("source").describe_groups([group])[group].is_active  # the member left
