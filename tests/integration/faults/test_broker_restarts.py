"""kill -9 a broker mid-copy, start it again: the batch (retried like Airflow would) copies each record once.

Runs on the session's private clusters, never on the shared test bed (other tests use its brokers).
"""

from __future__ import annotations

import time

import pytest
from fault_support import (
    check_caught_up_exactly,
    configs_env,
    run_to_success,
    seed_volume,
    start_copy_job,
    wait_until_copied,
)
from scenarios import provision, write_spec

from kafka_ferry.operators.copy import PlanCopyBatchOperator

pytestmark = [pytest.mark.integration, pytest.mark.faults]

PARTITIONS, PER_PARTITION = 4, 40_000


@pytest.mark.parametrize("side", ["source", "destination"])
def test_broker_killed_and_restarted_mid_copy(private, tmp_path, work_dir, side):
    p = private.unique(f"brk-{side[:3]}")
    topic = private.create_topic("source", f"{p}.t", PARTITIONS)
    seed_volume(private, topic, PARTITIONS, PER_PARTITION)
    spec_path = write_spec(tmp_path, private, p)
    provision(spec_path)
    env = configs_env(private)
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})
    log = tmp_path / "copy-job.log"

    job = start_copy_job(plan["plan_path"], env, log)
    landed = wait_until_copied(private, topic, PARTITIONS, PARTITIONS * PER_PARTITION // 5, job)
    killed_at = time.monotonic()
    broker_down_s = private.restart_broker(side)
    first_rc = job.wait(600)
    attempts = 1 if first_rc == 0 else 1 + run_to_success(plan["plan_path"], env, log)
    recover_s = time.monotonic() - killed_at

    check_caught_up_exactly(private, spec_path, topic, PARTITIONS, PARTITIONS * PER_PARTITION,
                            f"{side} broker kill -9 + restart mid-copy (killed at {landed} records copied, broker "
                            f"back after {broker_down_s:.1f} s, job attempts {attempts}, first exit {first_rc})",
                            recover_s)
