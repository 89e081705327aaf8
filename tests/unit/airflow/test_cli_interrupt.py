"""A TERM or INT to a command that runs the DAG: it stops, says in one line what became of the run and how to go on,
exits 128 + the signal, and stops the processes it started (``kafka_ferry.cli.interrupt``).

A real subprocess gets a real signal. Inside it, the run's reader and the metadata DB's marking are stand-ins that
record their call (no Airflow DB here: `tests/integration/test_cli.py` signals a real `kafka-ferry run`); what is
real is the part that failed: after the guard is set, the process replaces the SIGTERM handler the way the Task
SDK's task runner does for every task (a handler that returns), which swallowed the TERM before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

from kafka_ferry.cli.interrupt import stop_line

CHILD = textwrap.dedent("""
    import signal, subprocess, sys, time
    from kafka_ferry.cli.interrupt import RunInterrupts

    run = {"run_id": "manual__2026-11-27T02:00:00+00:00", "mode": "promote", "state": "running",
           "tasks": [{"task_id": "source_quiesced", "state": "deferred"},
                     {"task_id": "preflight", "state": "success"}]}

    def mark(dag_id, run_id):
        print(f"marked {dag_id} {run_id}", flush=True)
        return True

    with RunInterrupts("kafka_ferry__shop", ["promote", "dags/migrations/shop.yaml", "--yes-i-mean", "shop"],
                       "dags/migrations/shop.yaml", current_run=lambda: run, mark=mark):
        signal.signal(signal.SIGTERM, lambda *_: None)  # what the task runner does for each task
        sleeper = subprocess.Popen(["sleep", "600"])  # a process this command started (a Spark JVM, say)
        # a process whose parent died before the stop (a spark-submit the copy's on_kill killed first: its Python
        # driver and workers are orphans): started below this one, then no one's descendant but its reaper's
        parent = subprocess.Popen([sys.executable, "-c", "import subprocess as s; print(s.Popen(['sleep', '600'], "
                                   "stdin=s.DEVNULL, stdout=s.DEVNULL, stderr=s.DEVNULL).pid)"],
                                  stdout=subprocess.PIPE, text=True)
        orphan = int(parent.stdout.readline())
        parent.wait()
        print(f"ready {sleeper.pid} {orphan}", flush=True)
        while True:
            time.sleep(0.2)  # a sensor waiting
    print("the guard let the run end", flush=True)
""")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_command_marks_the_run_and_names_the_way_on(signum):
    with subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}) as proc:
        assert proc.stdout is not None and proc.stderr is not None  # both piped
        try:
            ready = proc.stdout.readline()
            assert ready.startswith("ready "), ready + proc.stderr.read()
            sleeper, orphan = map(int, ready.split()[1:])
            assert psutil.pid_exists(sleeper) and psutil.pid_exists(orphan)
            proc.send_signal(signum)
            out, err = proc.communicate(timeout=120)  # generous: the stop itself takes well under a second
            code = proc.returncode
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=30)
    assert code == 128 + signum, (code, out, err)
    assert "marked kafka_ferry__shop manual__2026-11-27T02:00:00+00:00" in out
    assert "the guard let the run end" not in out
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith(f"kafka-ferry: stopped by {signal.Signals(signum).name} at task source_quiesced; "
                           "run manual__2026-11-27T02:00:00+00:00 (mode promote) marked failed"), line
    assert "`kafka-ferry promote dags/migrations/shop.yaml --yes-i-mean shop`" in line
    assert "`kafka-ferry status dags/migrations/shop.yaml`" in line
    assert "reset-promotion" not in line and "rollback" not in line
    assert not psutil.pid_exists(sleeper) or psutil.Process(sleeper).status() == psutil.STATUS_ZOMBIE
    try:
        assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE, \
            "an orphaned descendant outlived the command"
    finally:
        if psutil.pid_exists(orphan) and psutil.Process(orphan).name() == "sleep":
            psutil.Process(orphan).kill()


def test_the_line_says_when_no_run_started_or_the_run_had_ended_or_could_not_be_marked():
    before = stop_line("SIGINT", None, False, ["run", "s.yaml"], "s.yaml")
    assert before == ("kafka-ferry: stopped by SIGINT before the DAG run started; nothing ran. To start again: "
                      "`kafka-ferry run s.yaml`")
    run = {"run_id": "r1", "mode": "catch-up", "state": "success", "tasks": [{"task_id": "t", "state": "success"}]}
    assert "between tasks; run r1 (mode catch-up) had already ended (success);" in stop_line(
        "SIGTERM", run, False, ["run", "s.yaml"], "s.yaml")
    running = {**run, "state": "running", "tasks": [{"task_id": "copy_batch", "state": "running"}]}
    assert "at task copy_batch; run r1 (mode catch-up) still recorded as running in Airflow's metadata DB" in (
        stop_line("SIGTERM", running, False, ["run", "s.yaml"], "s.yaml"))
