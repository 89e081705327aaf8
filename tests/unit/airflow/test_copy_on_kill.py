"""Killing the copy task ends everything its spark-submit started (``CopyBatchSparkOperator.on_kill``).

The provider's ``SparkSubmitHook.on_kill`` SIGKILLs the spark-submit process alone. In local and client mode that
process has started the job's Python driver (and the executors' Python workers), which were orphaned and ran on
after the task was killed. The hook here is the provider's own, for a real local master; the process it kills is a
real process that has started a child, as spark-submit starts the driver."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil
import pytest
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from kafka_ferry.operators.copy import CopyBatchSparkOperator

# spark-submit's stand-in: starts the driver (a sleep) and, like the SparkSubmit JVM, keeps a child unreaped (a zombie)
# (posix_spawn: a Popen would be reaped by the next Popen's clean-up)
SUBMIT = ("import os, shutil, subprocess as s, time; os.posix_spawn(shutil.which('true'), ['true'], os.environ); "
          "print(s.Popen(['sleep', '600'], stdin=s.DEVNULL, stdout=s.DEVNULL, stderr=s.DEVNULL).pid, flush=True); "
          "time.sleep(600)")


def _gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.fixture
def submitted(monkeypatch):
    """An operator whose hook (for a ``local[1]`` Spark connection) runs a spark-submit that started a driver."""
    monkeypatch.setenv("AIRFLOW_CONN_KF_KILL_SPARK", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    operator = CopyBatchSparkOperator(task_id="copy_batch", spec_path="unused.yaml", conn_id="kf_kill_spark")
    operator._hook = operator._get_hook()
    process = subprocess.Popen([sys.executable, "-c", SUBMIT], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    driver = int(process.stdout.readline())
    operator._hook._submit_sp = process
    try:
        yield operator, process, driver
    finally:
        for pid in (process.pid, driver):
            if not _gone(pid):
                psutil.Process(pid).kill()
        process.wait(30)
        process.stdout.close()


def test_killing_the_copy_task_ends_the_spark_submit_and_the_driver_it_started(submitted):
    operator, process, driver = submitted
    operator.on_kill()
    assert process.wait(30) == -9  # the provider's kill of spark-submit still happens
    assert _gone(driver), "the driver spark-submit started outlived the killed task"


def test_a_zombie_below_spark_submit_counts_as_gone(submitted):
    """The JVM's unreaped child runs nothing; waiting for it to vanish would wait out every timeout of the kill."""
    from kafka_ferry.process_tree import _gone, descendants

    _operator, process, driver = submitted
    for _ in range(300):  # `true` ends at once; its parent never reaps it
        zombies = [p for p in descendants(process.pid) if p.pid != driver and _status(p) == psutil.STATUS_ZOMBIE]
        if zombies:
            break
        time.sleep(0.1)
    assert len(zombies) == 1, [(p.pid, _status(p)) for p in descendants(process.pid)]
    assert _gone(zombies[0]) and not _gone(psutil.Process(driver))


def _status(process: psutil.Process) -> str:
    try:
        return process.status()
    except psutil.NoSuchProcess:
        return "gone"


def test_the_providers_kill_alone_leaves_the_driver_running(submitted):
    """What ``on_kill`` adds to: without it the driver runs on (re-parented), which is why it exists."""
    operator, process, driver = submitted
    SparkSubmitOperator.on_kill(operator)
    assert process.wait(30) == -9
    assert not _gone(driver)
