"""Rollback after cutover on the real clusters: migrate and promote, produce and consume on the destination, stop, roll
back; every post-cutover record is on the source once and in order, every group reads on from exactly where it stopped,
the source's own records are untouched; a second one changes nothing (a killed rollback resumes:
faults/test_rollback_kills.py)."""

from __future__ import annotations

import json
import textwrap

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from scenarios import (
    BASE_TS,
    COMPACT_CONFIG,
    commit_source_group,
    committed_offsets,
    consume_some,
    provision,
    provision_groups,
    read_on_as_group,
    read_partition,
    remaining,
    seed_compacted,
    seed_plain,
    seed_transactional,
    shape,
    write_spec,
)

from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.operators.rollback import RollbackMigrationOperator
from kafka_ferry.promotion.guard import assert_not_promoted
from kafka_ferry.promotion.rollback import STEPS, RollbackRunner
from kafka_ferry.promotion.steps import PromotionRunner
from kafka_ferry.state.rollback import rollback_status
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.long]

KINDS = ("plain", "compact", "txn")


def promoted_migration(clusters, tmp_path):
    """Seeded source topics (plain, compacted with holes, transactional with aborts), one group per topic committed
    mid-way, provisioned and promoted (the promotion's final copy does the whole copy)."""
    p = clusters.unique("rb")
    topics = {}
    for kind in KINDS:
        topics[kind] = clusters.create_topic("source", f"{p}.{kind}", 2, COMPACT_CONFIG if kind == "compact" else None)
    seed_plain(clusters, topics["plain"], 2, 30)
    seed_compacted(clusters, topics["compact"], 2, 40)
    seed_transactional(clusters, topics["txn"], 2, 6, plain_between=True)
    groups = {}
    for i, kind in enumerate(KINDS):
        t = topics[kind]
        offsets = committed_offsets(clusters, "source", t, 2)
        groups[kind] = f"{p}-g{i}"
        commit_source_group(clusters, groups[kind], {(t, q): offsets[q][len(offsets[q]) // 2] for q in range(2)})
    spec_path = write_spec(tmp_path, clusters, p, promotion={"quiesce_window_seconds": 1})
    spec = load_spec(spec_path)
    provision(spec_path)
    provision_groups(spec_path)
    work = tmp_path / "work"
    promoted = PromotionRunner(spec, clusters.cluster("source"), clusters.cluster("destination"), work_dir=work).run()
    assert promoted["status"] == "promoted"
    # the promotion report carries the way back: nothing to copy yet, every group back where it stopped
    assert promoted["rollback_plan"]["records"] == 0 and len(promoted["rollback_plan"]["groups"]) == 3
    # The cleaner must not change either side while the test compares them (new keys below are unique anyway).
    for side in ("source", "destination"):
        entry = ConfigEntry("min.compaction.lag.ms", str(10**12), incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, topics["compact"], incremental_configs=[entry])
        for future in clusters.admin(side).incremental_alter_configs([resource]).values():
            future.result(30)
    return {"spec": spec, "spec_path": spec_path, "topics": topics, "groups": groups, "work_dir": work}


def produce_on_destination(clusters, topics, round_: int, side: str = "destination") -> None:
    """After the cutover (or, ``side`` source, after a rollback): plain records (keys, null values, headers,
    timestamps), unique keys on the compacted topic, and transactions on the transactional one, every second one
    aborted, with plain records between."""
    plain = clusters.producer(side, **{"enable.idempotence": True})
    for q in range(2):
        for i in range(12):
            headers = [("d", f"{round_}-{q}-{i}".encode()), ("d", None)] if i % 3 == 0 else None
            plain.produce(topics["plain"], key=f"dk{i}".encode() if i % 5 else None,
                          value=None if i == 7 else f"dest-{round_}-{q}-{i}".encode(), partition=q,
                          timestamp=BASE_TS + 10**6 + round_ * 10**5 + i, headers=headers)
            plain.produce(topics["compact"], key=f"dest-key-{round_}-{q}-{i}".encode(),
                          value=f"c-{round_}-{i}".encode(), partition=q, timestamp=BASE_TS + 10**6 + i)
    assert plain.flush(30) == 0
    txn = clusters.producer(side, **{"transactional.id": f"{topics['txn']}-{side}-{round_}"})
    txn.init_transactions(30)
    for r in range(4):
        txn.begin_transaction()
        for q in range(2):
            for i in range(3):
                txn.produce(topics["txn"], key=f"dt{r}".encode(), value=f"dtxn-{round_}-{r}-{q}-{i}".encode(),
                            partition=q, timestamp=BASE_TS + 10**6 + r, headers=[("r", str(r).encode())])
        txn.flush(30)
        (txn.abort_transaction if r % 2 else txn.commit_transaction)(30)
        plain.produce(topics["txn"], value=f"between-{round_}-{r}".encode(), partition=r % 2)
        assert plain.flush(30) == 0


def source_split(clusters, topics, destination_id):
    """Per (topic, partition): the source's own records and the ones copied back (their provenance names the
    destination), as read_committed sees them."""
    own, back = {}, {}
    for t in topics.values():
        for q in range(2):
            recs = read_partition(clusters, "source", t, q)
            own[(t, q)] = [(r.offset, shape(r)) for r in recs if read_provenance(r.headers)[0] != destination_id]
            back[(t, q)] = [shape(r) for r in recs if read_provenance(r.headers)[0] == destination_id]
    return own, back


def post_cutover(clusters, topics, source_id):
    """Per (topic, partition): the destination's committed records that were not copied from the source."""
    return {(t, q): [shape(r) for r in read_partition(clusters, "destination", t, q)
                     if read_provenance(r.headers)[0] != source_id] for t in topics.values() for q in range(2)}


def read_promotions_of(store) -> set[str]:
    from kafka_ferry.state.staged_cutover import promoted_groups

    return set(promoted_groups(store))


def prepare(clusters, tmp_path):
    """Promoted, then producers and consumers ran on the destination and stopped: the state a rollback starts from."""
    m = promoted_migration(clusters, tmp_path)
    produce_on_destination(clusters, m["topics"], 0)
    stops = {"plain": {0: 20, 1: 25}, "compact": {0: 3, 1: 0}, "txn": {0: None, 1: 8}}
    for kind, per_partition in stops.items():
        consume_some(clusters, "destination", m["groups"][kind], m["topics"][kind], per_partition)
    m["ids"] = {side: clusters.cluster(side).describe_cluster().cluster_id for side in ("source", "destination")}
    m["expected"] = {kind: remaining(clusters, "destination", m["groups"][kind], m["topics"][kind]) for kind in KINDS}
    m["own_before"], _ = source_split(clusters, m["topics"], m["ids"]["destination"])
    m["post"] = post_cutover(clusters, m["topics"], m["ids"]["source"])
    assert all(m["post"].values())
    return m


def rollback(clusters, m, **kwargs):
    return RollbackRunner(m["spec"], clusters.cluster("source"), clusters.cluster("destination"),
                          work_dir=m["work_dir"], quiesce_window_s=1.0, **kwargs)


def assert_rolled_back_exactly(clusters, m):
    own_after, back = source_split(clusters, m["topics"], m["ids"]["destination"])
    assert own_after == m["own_before"]  # the source's own records: same offsets, same contents
    assert back == m["post"]  # every post-cutover record once, in order, with its key, value, headers, timestamp
    for kind in KINDS:
        assert read_on_as_group(clusters, m["groups"][kind], m["topics"][kind]) == m["expected"][kind], kind


def test_rollback_copies_back_exactly_and_groups_read_on_on_the_source(clusters, tmp_path):
    m = prepare(clusters, tmp_path)
    parts = [(t, q) for t in m["topics"].values() for q in range(2)]
    source_before = clusters.cluster("source").list_offsets(parts)
    plan = RollbackMigrationOperator(task_id="rollback", spec_path=m["spec_path"], dry_run=True,
                                     work_dir=str(m["work_dir"])).execute({})  # the dry run: the plan, no change
    assert clusters.cluster("source").list_offsets(parts) == source_before
    assert not any(t.endswith(".rollback") for t in clusters.cluster("source").list_topic_names()
                   if t.startswith("kafka-ferry." + m["spec"].name))
    assert plan["records"] == sum(len(v) for v in m["post"].values())

    summary = RollbackMigrationOperator(task_id="rollback", spec_path=m["spec_path"],
                                        work_dir=str(m["work_dir"])).execute({})
    report = {**summary, "groups": json.loads((m["work_dir"] / "rollback-report.json").read_text())["groups"]}

    def where(groups):
        return {g: [(r["source_topic"], r["partition"], r["destination_offset"], r["source_offset"], r["method"])
                    for r in rows] for g, rows in groups.items()}

    assert where(plan["groups"]) == where(report["groups"])  # the plan said where every group resumes
    assert {s: v["status"] for s, v in report["this_run"].items()} == {s: "done" for s in STEPS}
    assert report["status"] == "rolled-back"
    store = MigrationStateStore(clusters.cluster("destination"), m["spec"].state_topic_name)
    status = rollback_status(store)
    assert status is not None and status["status"] == "rolled-back"
    assert_not_promoted(store)  # copy runs may go on
    methods = {r["method"] for rows in report["groups"].values() for r in rows}
    assert {"forward-copied-record", "copied-back-record"} <= methods, report["groups"]
    ends = clusters.cluster("source").list_offsets([(t, q) for t in m["topics"].values() for q in range(2)])
    again = rollback(clusters, m).run()  # a second rollback changes nothing
    assert {v["status"] for v in again["this_run"].values()} == {"resumed"}
    assert clusters.cluster("source").list_offsets(list(ends)) == ends
    assert_rolled_back_exactly(clusters, m)


# argv: spec, work dir, the step after which the process dies (os._exit(137)), and optionally a copy.faults spec
# (KFERRY_FAULT's syntax) the copy-back runs under: the process then dies inside that step (exit code 86). Each step
# it finished is printed ("done <step>"), so a test sees where a resumed process started.
KILL_SCRIPT = textwrap.dedent("""
    import functools, os, sys
    from kafka_ferry.core.specs.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.promotion import rollback
    spec = load_spec(sys.argv[1])
    if len(sys.argv) > 4:
        rollback.copy_group = functools.partial(rollback.copy_group, fault_spec=sys.argv[4])
    def die(step):
        print("done", step, flush=True)
        if step == sys.argv[3]:
            os._exit(137)  # like SIGKILL: no cleanup, no exception handling
    rollback.RollbackRunner(spec, kafka_cluster(spec.source.connection_id),
                            kafka_cluster(spec.destination.connection_id), work_dir=sys.argv[2],
                            quiesce_window_s=1.0, after_step=die).run()
""")


def test_after_a_rollback_catch_up_and_promote_again_exactly(clusters, tmp_path):
    m = prepare(clusters, tmp_path)
    assert rollback(clusters, m).run()["status"] == "rolled-back"
    produce_on_destination(clusters, m["topics"], 1, side="source")  # producers are back on the source
    # the plain group stays among the copied-back records, the txn group stops among them on partition 1 (where
    # the destination had markers and aborted records: the forward map alone would skip the rest of them)
    for kind, per_partition in {"compact": {0: 10, 1: 2}, "txn": {0: 4, 1: 4}}.items():
        consume_some(clusters, "source", m["groups"][kind], m["topics"][kind], per_partition)
    expected = {kind: remaining(clusters, "source", m["groups"][kind], m["topics"][kind]) for kind in KINDS}
    own, _ = source_split(clusters, m["topics"], m["ids"]["destination"])

    report = PromotionRunner(m["spec"], clusters.cluster("source"), clusters.cluster("destination"),
                             work_dir=m["work_dir"]).run()

    assert report["status"] == "promoted" and report["reconciliation"]["ok"]
    assert post_cutover(clusters, m["topics"], m["ids"]["source"]) == m["post"]  # nothing of it copied forward
    for (t, q), records in own.items():  # each source record on the destination exactly once, in order
        copied = [(read_provenance(r.headers)[1], shape(r)) for r in read_partition(clusters, "destination", t, q)
                  if read_provenance(r.headers)[0] == m["ids"]["source"]]
        assert copied == records, (t, q)
    for kind in KINDS:
        assert read_on_as_group(clusters, m["groups"][kind], m["topics"][kind], "destination") == expected[kind], kind
    assert "copied-back-record" in {r["method"] for r in report["groups"]}, report["groups"]

    # and back once more: the second copy-back goes on from its own progress, the logs now interleave
    produce_on_destination(clusters, m["topics"], 2)
    again: dict[str, dict[int, int | None]] = {"plain": {0: 30, 1: 3}, "compact": {0: 4, 1: None}, "txn": {0: 9, 1: 2}}
    for kind, stops_again in again.items():
        consume_some(clusters, "destination", m["groups"][kind], m["topics"][kind], stops_again)
    m["expected"] = {kind: remaining(clusters, "destination", m["groups"][kind], m["topics"][kind]) for kind in KINDS}
    m["own_before"], _ = source_split(clusters, m["topics"], m["ids"]["destination"])
    m["post"] = post_cutover(clusters, m["topics"], m["ids"]["source"])
    assert rollback(clusters, m).run()["status"] == "rolled-back"
    assert_rolled_back_exactly(clusters, m)


def test_staged_one_promoted_group_rolls_back_while_another_stays_promoted(clusters, tmp_path):
    from scenarios import one_group_migration
    from staged_support import one_catch_up_batch, thread_copy

    from kafka_ferry.promotion.group import promote_group
    from kafka_ferry.promotion.group_rollback import rollback_group
    from kafka_ferry.state.staged_cutover import promoted_groups

    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "grb", 2, 30, {0: 7, 1: 19})
    back, stays = f"{p}-g", f"{p}-b"
    commit_source_group(clusters, stays, {(topic, 0): 3, (topic, 1): 3})
    provision_groups(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    for group in (back, stays):
        assert promote_group(spec, source, destination, store, group, f"run-{group}", thread_copy).promoted
    seed_plain(clusters, topic, 2, 10, start=30)  # producers still write to the source; a catch-up brings it over
    assert one_catch_up_batch(spec, source, destination, store) == 20
    for group, per_partition in ((back, {0: 8, 1: 2}), (stays, {0: 5, 1: 5})):
        consume_some(clusters, "destination", group, topic, per_partition)  # the mirror keeps the topic's name
    expected = remaining(clusters, "destination", back, topic)
    stays_offsets = destination.group_offsets(stays)
    plan = RollbackMigrationOperator(task_id="rollback", spec_path=spec_path, dry_run=True).execute(
        {"params": {"groups": [back]}})  # the form's rollback-plan with the group named: where it would resume
    assert list(plan["groups"]) == [back] and read_promotions_of(store) == {back, stays}

    record = rollback_group(spec, source, destination, store, back)

    assert record["status"] == "rolled-back"
    assert promoted_groups(store) == [stays] and destination.group_offsets(stays) == stays_offsets
    assert {r["source_offset"] for r in record["offsets"]} == {7 + 8, 19 + 2}
    assert rollback_group(spec, source, destination, store, back) == record  # a second one changes nothing
    assert RollbackMigrationOperator(task_id="rollback", spec_path=spec_path).execute(
        {"params": {"groups": [back]}})["groups"] == {back: record["offsets"]}
    assert [(r["source_offset"], r["method"]) for r in plan["groups"][back]] == [
        (r["source_offset"], r["method"]) for r in record["offsets"]]
    assert read_on_as_group(clusters, back, topic) == expected
