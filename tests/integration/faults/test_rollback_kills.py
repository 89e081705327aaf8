"""Rollback killed (os._exit, like SIGKILL) after each of its steps, then run again: it resumes at its first
unfinished step, and the result is exact: every post-cutover record on the source once and in order, every group
resuming where it stopped on the destination (the checks of test_rollback.py). The same for one topic of a staged
cutover (test_topic_rollback.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_rollback import KILL_SCRIPT, assert_rolled_back_exactly, prepare, rollback
from test_topic_rollback import KILL_TOPIC_SCRIPT, assert_topic_rolled_back_exactly, prepare_topics

from kafka_ferry.promotion.rollback import STEPS
from kafka_ferry.promotion.topic_rollback import TOPIC_STEPS, rollback_topics
from kafka_ferry.state.rollback import topic_rollback

pytestmark = [pytest.mark.integration, pytest.mark.faults]


@pytest.mark.parametrize("killed_after", STEPS)
def test_a_killed_rollback_resumes_after_its_last_step(private, tmp_path, killed_after):
    m = prepare(private, tmp_path)
    killed = subprocess.run([sys.executable, "-c", KILL_SCRIPT, m["spec_path"], str(m["work_dir"]), killed_after],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == 137, killed.stderr[-3000:]

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
    assert sorted(done["steps"]) == sorted(TOPIC_STEPS[:TOPIC_STEPS.index(killed_after) + 1][:4])

    rollback_topics(m["spec"], private.cluster("source"), private.cluster("destination"), m["store"], [m["back"]],
                    quiesce_window_s=0.5)

    assert_topic_rolled_back_exactly(private, m)
