"""Promotion against real brokers: end to end with the Spark copy job, a killed run resumes, a mismatch blocks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest
from airflow.sdk.exceptions import AirflowFailException
from scenarios import (
    COMPACT_CONFIG,
    commit_source_group,
    committed_offsets,
    consume_as_group,
    provision,
    provision_groups,
    seed_compacted,
    seed_plain,
    seed_transactional,
    write_spec,
)

from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.operators.copy import PlanCopyBatchOperator
from kafka_ferry.promotion.guard import MigrationPromotedError, assert_not_promoted, reset_promotion
from kafka_ferry.promotion.readiness import check_group_offsets_synced
from kafka_ferry.promotion.reconcile import ReconciliationMismatch
from kafka_ferry.promotion.steps import STEPS, PromotionRunner
from kafka_ferry.state.promotion import RollbackStillPossible
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration


def migration(clusters, tmp_path, kinds=("plain", "txn"), **spec_overrides):
    """Seeded topics, groups committed mid-way, provisioned; nothing copied yet."""
    p = clusters.unique("pr")
    topics = {}
    for kind in kinds:
        topics[kind] = clusters.create_topic("source", f"{p}.{kind}", 2, COMPACT_CONFIG if kind == "compact" else None)
        {"plain": lambda t: seed_plain(clusters, t, 2, 30), "compact": lambda t: seed_compacted(clusters, t, 2, 40),
         "txn": lambda t: seed_transactional(clusters, t, 2, 9, plain_between=True)}[kind](topics[kind])
    committed = {t: committed_offsets(clusters, "source", t, 2) for t in topics.values()}
    positions = {}
    for i, t in enumerate(topics.values()):
        positions[f"{p}-g{i}"] = {(t, q): len(committed[t][q]) // 2 + q for q in range(2)}
        commit_source_group(clusters, f"{p}-g{i}", positions[f"{p}-g{i}"], metadata=f"m{i}")
    spec_path = write_spec(tmp_path, clusters, p, **spec_overrides)
    spec = load_spec(spec_path)
    provision(spec_path)
    provision_groups(spec_path)
    return {"spec": spec, "spec_path": spec_path, "topics": topics, "committed": committed, "positions": positions,
            "work_dir": tmp_path / "work"}


def runner(clusters, m, **kwargs):
    return PromotionRunner(m["spec"], clusters.cluster("source"), clusters.cluster("destination"),
                           work_dir=m["work_dir"], **kwargs)


def assert_groups_resume_exactly(clusters, m):
    for group, offsets in m["positions"].items():
        topic = next(iter(offsets))[0]
        received = consume_as_group(clusters, group, topic, 2)
        for q in range(2):
            assert received[q] == [o for o in m["committed"][topic][q] if o >= offsets[(topic, q)]], (group, q)


def test_promotion_end_to_end_with_the_copy_job(clusters, tmp_path):
    m = migration(clusters, tmp_path, kinds=("plain", "compact", "txn"))
    store = MigrationStateStore(clusters.cluster("destination"), m["spec"].state_topic_name)

    report = runner(clusters, m).run()

    assert report["status"] == "promoted"
    assert {s: v["status"] for s, v in report["this_run"].items()} == {s: "done" for s in STEPS}
    assert report["reconciliation"]["ok"] and report["reconciliation"]["partitions_checked"] == 6
    assert len(report["groups"]) == 6 and all(r["downstream_offset"] is not None for r in report["groups"])
    assert json.loads((m["work_dir"] / "promotion-report.json").read_text())["status"] == "promoted"
    assert (m["work_dir"] / "offset-map" / "offset-map.csv").exists()
    assert_groups_resume_exactly(clusters, m)
    assert check_group_offsets_synced(clusters.cluster("destination"), store)[0]
    with pytest.raises(MigrationPromotedError, match=r"promoted at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: "
                                                     r".* \(kafka-ferry rollback <spec file>\); after it, catch-up "
                                                     r"runs copy again and a new promote starts over$"):
        assert_not_promoted(store)
    with pytest.raises(AirflowFailException, match="kafka-ferry rollback " + re.escape(m["spec_path"])):
        # the DAG's copy planning refuses too, naming the way back (the rollback) for this spec
        PlanCopyBatchOperator(task_id="plan_copy", spec_path=m["spec_path"]).execute({})
    again = runner(clusters, m).run()  # idempotent: everything resumes, nothing redone
    assert {v["status"] for v in again["this_run"].values()} == {"resumed"}
    with pytest.raises(RollbackStillPossible):  # the reset would drop the way back: refused, nothing changed
        reset_promotion(store)
    with pytest.raises(MigrationPromotedError):
        assert_not_promoted(store)
    reset_promotion(store, give_up_rollback=True)
    assert_not_promoted(store)


KILL_SCRIPT = textwrap.dedent("""
    import os, sys
    from kafka_ferry.core.specs.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.promotion.steps import PromotionRunner
    spec = load_spec(sys.argv[1])
    def die(step):
        if step == sys.argv[3]:
            os._exit(137)  # like SIGKILL: no cleanup, no exception handling
    PromotionRunner(spec, kafka_cluster(spec.source.connection_id), kafka_cluster(spec.destination.connection_id),
                    work_dir=sys.argv[2], after_step=die).run()
""")


def test_killed_promotion_resumes_from_its_last_completed_step(clusters, tmp_path):
    m = migration(clusters, tmp_path)
    killed = subprocess.run([sys.executable, "-c", KILL_SCRIPT, m["spec_path"], str(m["work_dir"]), "commit_offsets"],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == 137, killed.stderr[-3000:]
    store = MigrationStateStore(clusters.cluster("destination"), m["spec"].state_topic_name)
    assert_not_promoted(store)  # not promoted yet

    report = runner(clusters, m).run()

    assert {s: v["status"] for s, v in report["this_run"].items()} == {
        "final_copy": "resumed", "final_translation": "resumed", "commit_offsets": "resumed",
        "reconcile": "done", "switch_timestamps": "done", "mark_promoted": "done"}
    assert report["status"] == "promoted"
    assert_groups_resume_exactly(clusters, m)


def test_reconciliation_mismatch_blocks_promotion_and_names_the_partition(clusters, tmp_path):
    m = migration(clusters, tmp_path, kinds=("plain",))
    r = runner(clusters, m)
    r.run(steps=("final_copy",))
    topic = m["topics"]["plain"]
    producer = clusters.producer("destination")  # a stray record on the destination, not from the source
    producer.produce(topic, value=b"stray", partition=1)
    producer.flush(30)

    with pytest.raises(ReconciliationMismatch, match=rf"{topic}-1 .*first difference"):
        runner(clusters, m).run()

    store = MigrationStateStore(clusters.cluster("destination"), m["spec"].state_topic_name)
    assert_not_promoted(store)
    assert "reconcile" not in runner(clusters, m).completed_steps()
    report = json.loads((m["work_dir"] / "promotion-report.json").read_text())
    assert report["reconciliation"]["mismatched"] == [f"{topic}:1"]
    assert report["status"] == "in-progress"
