"""Promotion killed (os._exit, like SIGKILL) after each of its steps, then run again: it resumes from its last
completed step, commits the exact offsets, and every record is on the destination exactly once."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from fault_support import count_exact
from test_promotion import KILL_SCRIPT, assert_groups_resume_exactly, migration, runner

from kafka_ferry.promotion.steps import STEPS

pytestmark = [pytest.mark.integration, pytest.mark.faults]


@pytest.mark.parametrize("step", STEPS[:-1])
def test_promotion_killed_after_each_step_resumes(private, tmp_path, step):
    m = migration(private, tmp_path)
    killed = subprocess.run([sys.executable, "-c", KILL_SCRIPT, m["spec_path"], str(m["work_dir"]), step],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == 137, killed.stderr[-3000:]
    started = time.monotonic()

    report = runner(private, m).run()

    done = STEPS[:STEPS.index(step) + 1]
    assert {s: v["status"] for s, v in report["this_run"].items()} == {
        s: "resumed" if s in done else "done" for s in STEPS}
    assert report["status"] == "promoted"
    assert_groups_resume_exactly(private, m)
    source_id = private.cluster("source").describe_cluster().cluster_id
    figures = [count_exact(private, t, t, 2, source_id) for t in m["topics"].values()]
    assert all((f.lost, f.duplicated, f.mismatched) == (0, 0, 0) for f in figures)
    total = sum(f.checked for f in figures)
    print(f"FAULT-MATRIX promotion killed after {step}: resumed, records checked {total}, lost 0, duplicated 0, "
          f"group offsets exact; time to recover {time.monotonic() - started:.1f} s")
