"""The copy job SIGKILLed from outside at random moments, and the Airflow copy task killed after partial success.

Not the job's own fault points: a kill from outside lands anywhere (mid-produce, mid-flush, mid-progress
write). Each rerun of the same plan is what Airflow's retry of copy_batch does.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import time

import pytest
from fault_support import (
    check_caught_up_exactly,
    configs_env,
    copied_so_far,
    kill_group,
    progress_of,
    run_to_success,
    seed_volume,
    start_copy_job,
)
from scenarios import provision, write_spec

from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.operators.copy import CopyReportOperator, PlanCopyBatchOperator

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def test_copy_job_sigkilled_at_random_moments_several_times(private, tmp_path, work_dir):
    partitions, per_partition, kills = 6, 100_000, 5  # one batch: copy.max_records_per_partition
    seed = int(os.environ.get("KFERRY_FAULT_SEED", random.randrange(10**6)))
    rng = random.Random(seed)
    p = private.unique("sigkill")
    topic = private.create_topic("source", f"{p}.t", partitions)
    seed_volume(private, topic, partitions, per_partition, value_size=100)
    spec_path = write_spec(tmp_path, private, p)
    provision(spec_path)
    env = configs_env(private)
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})
    log = tmp_path / "copy-job.log"

    total = partitions * per_partition
    landed, mid_copy_kills = [], 0
    started = time.monotonic()
    for _ in range(kills):
        # The moment: when the destination holds 3-10 % of the batch more than before this attempt. A random
        # delay instead missed on a fast machine (the rest of the batch finished first); a step in records
        # lands mid-copy for at least three kills even with the poll's overshoot, and still anywhere in the
        # job's cycle (mid-produce, mid-flush, mid-progress write): the poll does not know where the job is.
        before = copied_so_far(private, topic, partitions)
        target = before + int(total * rng.uniform(0.03, 0.10))
        job = start_copy_job(plan["plan_path"], env, log)
        while job.poll() is None and copied_so_far(private, topic, partitions) < target:
            time.sleep(0.02)
        if job.poll() is not None:
            break
        kill_group(job)
        landed.append(copied_so_far(private, topic, partitions))
        mid_copy_kills += 0 < landed[-1] < total
    attempts = run_to_success(plan["plan_path"], env, log)
    recover_s = time.monotonic() - started

    assert mid_copy_kills >= 3, f"only {mid_copy_kills} kills landed mid-copy (seed {seed}, landed {landed})"
    check_caught_up_exactly(private, spec_path, topic, partitions, partitions * per_partition,
                            f"copy job SIGKILLed {len(landed)} times at random (seed {seed}; destination held "
                            f"{landed} records at the kills), then {attempts} clean run(s)", recover_s)


COPY_TASK = textwrap.dedent("""
    # One Airflow task attempt of copy_batch: the operator with the plan task's XCom, as a worker runs it.
    import json, sys
    from kafka_ferry.operators.copy import CopyBatchSparkOperator
    class TI:
        def xcom_pull(self, task_ids):
            return json.loads(sys.argv[2])
    op = CopyBatchSparkOperator(task_id="copy_batch", spec_path=sys.argv[1], conn_id=sys.argv[3],
                                env_vars={"PYSPARK_PYTHON": sys.executable})
    op.execute({"ti": TI()})
""")


def test_airflow_copy_task_killed_after_partial_success_then_retried(private, tmp_path, work_dir, spark_on_path):
    partitions, per_partition = 12, 50_000
    spark_conn = "kf_fault_spark_one_core"
    os.environ[f"AIRFLOW_CONN_{spark_conn.upper()}"] = json.dumps({"conn_type": "spark", "host": "local[1]"})
    p = private.unique("retry")
    topic = private.create_topic("source", f"{p}.t", partitions)
    seed_volume(private, topic, partitions, per_partition, value_size=100)
    spec_path = write_spec(tmp_path, private, p)
    provision(spec_path)
    state_topic = load_spec(spec_path).state_topic_name
    summary = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})
    cmd = [sys.executable, "-c", COPY_TASK, spec_path, json.dumps(summary), spark_conn]

    task = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    # local[1]: one Spark task, its lanes each copying partition after partition (tenths of a second each); kill as soon
    # as the progress of one is acknowledged in the state topic, the other eleven still to come.
    while time.monotonic() < deadline and not progress_of(private, state_topic):
        assert task.poll() is None, "the copy task finished before the kill"
        time.sleep(0.02)
    kill_group(task)  # the worker dies: spark-submit, the JVM and the Python workers with it
    acknowledged = len(progress_of(private, state_topic))
    killed_at = time.monotonic()
    retried = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    recover_s = time.monotonic() - killed_at
    assert retried.returncode == 0, retried.stderr[-3000:]
    report = CopyReportOperator(task_id="report", spec_path=spec_path).execute(
        {"ti": type("TI", (), {"xcom_pull": lambda self, task_ids: summary})()})

    assert 0 < acknowledged < partitions, acknowledged
    assert report["records_resumed"] + report["records_copied"] <= partitions * per_partition
    check_caught_up_exactly(private, spec_path, topic, partitions, partitions * per_partition,
                            f"Airflow copy task killed with {acknowledged}/{partitions} partitions acknowledged, then "
                            f"retried (retry copied {report['records_copied']}, resumed {report['records_resumed']})",
                            recover_s)
