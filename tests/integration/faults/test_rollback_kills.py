"""Rollback killed (os._exit, like SIGKILL) after each of its steps, then run again: it resumes at its first
unfinished step, and the result is exact: every post-cutover record on the source once and in order, every group
resuming where it stopped on the destination (the checks of test_rollback.py). The same for one topic of a staged
cutover (test_topic_rollback.py). In schema remap mode too, with the copy-back also killed inside its step: the
records come back with the source registry's ids (the checks of test_rollback_remap.py, in schema_support)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from scenarios import read_partition
from schema_support import (
    assert_remap_rolled_back,
    produce_remap_on_destination,
    promoted_remap_migration,
    remap_rollback,
    stop_remap_on_destination,
)
from test_rollback import KILL_SCRIPT, assert_rolled_back_exactly, prepare, rollback
from test_topic_rollback import KILL_TOPIC_SCRIPT, assert_topic_rolled_back_exactly, prepare_topics

from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.promotion.rollback import STEPS
from kafka_ferry.promotion.topic_rollback import TOPIC_STEPS, rollback_topics
from kafka_ferry.state.rollback import copy_back_progress, rollback_records, topic_rollback

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def killed_rollback(m, killed_after: str, fault: str | None = None, exit_code: int = 137) -> list[str]:
    """A rollback in a process of its own, killed after ``killed_after`` (or inside the copy-back by ``fault``);
    returns the steps it finished."""
    killed = subprocess.run([sys.executable, "-c", KILL_SCRIPT, m["spec_path"], str(m["work_dir"]), killed_after,
                             *([fault] if fault else [])], capture_output=True, text=True, timeout=300)
    assert killed.returncode == exit_code, killed.stderr[-3000:]
    return [line.split()[1] for line in killed.stdout.splitlines() if line.startswith("done ")]


def resumes(groups: dict[str, list[dict]]) -> dict[str, list[tuple]]:
    return {g: [(r["source_topic"], r["partition"], r["destination_offset"], r["source_offset"], r["method"])
                for r in rows] for g, rows in groups.items()}


@pytest.mark.parametrize("killed_after", STEPS)
def test_a_killed_rollback_resumes_after_its_last_step(private, tmp_path, killed_after):
    m = prepare(private, tmp_path)
    killed_rollback(m, killed_after)

    report = rollback(private, m).run()

    done_before = STEPS[:STEPS.index(killed_after) + 1]
    assert {s: v["status"] for s, v in report["this_run"].items()} == {
        s: "resumed" if s in done_before else "done" for s in STEPS}
    assert report["status"] == "rolled-back"
    assert_rolled_back_exactly(private, m)


@pytest.mark.parametrize("killed_after", TOPIC_STEPS)
def test_a_killed_topic_rollback_resumes_after_its_last_step(private, tmp_path, killed_after):
    m = prepare_topics(private, tmp_path)
    killed = subprocess.run([sys.executable, "-c", KILL_TOPIC_SCRIPT, m["spec_path"], m["back"], killed_after],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == 137, killed.stderr[-3000:]
    done = topic_rollback(m["store"], m["back"])
    assert done is not None
    assert sorted(done["steps"]) == sorted(TOPIC_STEPS[:TOPIC_STEPS.index(killed_after) + 1][:4])

    rollback_topics(m["spec"], private.cluster("source"), private.cluster("destination"), m["store"], [m["back"]],
                    quiesce_window_s=0.5)

    assert_topic_rolled_back_exactly(private, m)


def test_a_remap_rollback_killed_after_each_step_and_inside_the_copy_back_resumes(private, tmp_path, monkeypatch,
                                                                                axon_pair):
    """One migration, one process per step: each new process resumes at the first unfinished step and is killed
    right after it; the copy-back is also killed inside its step, twice, with records on the source its syncs and
    progress do not cover yet (part of partition 0, then all of partition 1): the next process finds them by
    provenance and must neither copy them again nor leave them out of the reconciliation's digests over the
    mapped-back ids."""
    m = promoted_remap_migration(private, tmp_path, monkeypatch, axon_pair)
    produce_remap_on_destination(private, m, m["account"], "d", 12)
    stop_remap_on_destination(private, m, {0: 4, 1: None})  # partition 0: among the post-cutover records
    source, destination_id = private.cluster("source"), m["ids"]["destination"]

    started = time.monotonic()
    assert killed_rollback(m, "quiesce") == ["quiesce"]
    # inside the copy-back (copy.faults' after_produce): once 3 records of partition 0 are acknowledged, then (the
    # next process) once all of partition 1's are; each time before that partition's syncs and progress
    for q, fault, at_least in ((0, f"after_produce:{m['topic']}:0:3", 3),
                               (1, f"after_produce:{m['topic']}:1", len(m["post"][1]))):
        assert killed_rollback(m, "-", fault, exit_code=86) == []
        tail = [r for r in read_partition(private, "source", m["topic"], q)
                if read_provenance(r.headers)[0] == destination_id]
        progress = copy_back_progress(m["spec"], source, remap_rollback(private, m).store)
        assert len(tail) >= at_least and (m["topic"], q) not in progress, (
            f"the kill {fault} did not land between the copied records and their progress")
        if q == 0:  # a dry run now: the resumed copy-back copies on after the records already there
            plan = remap_rollback(private, m).plan()
            assert plan["records"] == 13 - len(tail), plan["copy_back"]
    for step in STEPS[1:]:
        assert killed_rollback(m, step) == [step], f"a process after the kill did not resume at {step}"

    chain_s = time.monotonic() - started
    ends = source.list_offsets([(m["topic"], q) for q in range(2)])
    offsets = source.group_offsets(m["group"])
    report = remap_rollback(private, m).run()  # every step done: a second rollback changes nothing
    assert {s: v["status"] for s, v in report["this_run"].items()} == {s: "resumed" for s in STEPS}
    assert report["status"] == "rolled-back"
    assert source.list_offsets(list(ends)) == ends and source.group_offsets(m["group"]) == offsets
    assert resumes(plan["groups"]) == resumes(report["groups"]), "the dry run after the kill said otherwise"
    reconciled = rollback_records(remap_rollback(private, m).store)["step/reconcile"]["summary"]
    assert reconciled["records_checked"] == 13  # both processes' copies, digested over the mapped-back ids
    assert assert_remap_rolled_back(private, m) == 12
    print(f"FAULT-MATRIX remap rollback killed after each step and twice inside the copy-back: records checked 13, "
          f"lost 0, duplicated 0, values with the source id 12, group exact; 8 processes in {chain_s:.1f} s")
