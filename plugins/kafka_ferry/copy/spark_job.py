"""The copy batch's Spark job: ``python -m kafka_ferry.copy.spark_job --plan PLAN.json [--report REPORT.json]``.

It ships inside the package, so an installed wheel (the Docker image) runs it; spark-submit runs it
through a two-line launcher written next to the package zip (``packaging.write_launcher``) or the
repository's ``spark_jobs/copy_batch.py``. The driver reads the plan (no secrets) and both clusters'
client configs from ``KFERRY_CLUSTER_CONFIGS`` (set by the Airflow task, never on the command line),
spreads whole partitions over Spark tasks and collects their small per-partition results; record data
never enters the JVM. An empty plan finishes without starting a Spark session; ``--in-process`` copies
without Spark (one partition after another, for debugging and tests). Exit code 0 only when every
partition was copied and the report kept.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import time

from kafka_ferry.copy.batch import finish_batch, report_path_for, state_clients
from kafka_ferry.copy.copy_failures import failure_path_for, failure_record, first_failure, write_failure
from kafka_ferry.copy.faults import FAULT_ENV
from kafka_ferry.copy.lease import copy_lease
from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.copy.report import report_lines
from kafka_ferry.copy.runner import check_planned_topics, copy_plan_in_process, spark_task, task_groups
from kafka_ferry.core.copy_lease import CopyLeaseHeld
from kafka_ferry.kafka.configs import load_cluster_configs

log = logging.getLogger("kafka_ferry.copy_batch")
LEASE_HELD_EXIT = 3  # another copy job of the migration holds the lease: nothing was copied
FAILED_EXIT = 4  # a failure no retry heals: its record is beside the report (copy_failures.write_failure)


def spark_context(plan: CopyPlan):
    # A bare SparkContext, not a SparkSession: the job uses no SQL, and the session's start-up (pandas,
    # SQL catalog) cost seconds of every batch (docs/benchmarks.md). spark-submit's --master/--conf still apply
    # (SparkConf reads them).
    from pyspark import SparkConf, SparkContext

    _drop_numpy_converters()
    return SparkContext.getOrCreate(SparkConf().setAppName(f"kafka-ferry {plan.migration}"))


def run_on_spark(sc, plan: CopyPlan, configs: dict) -> list[dict]:
    groups = task_groups(plan, sc.defaultParallelism)
    sc.setJobDescription(f"kafka-ferry copy: migration {plan.migration}, batch {plan.batch_id} "
                         f"({len(plan.tasks)} partitions in {len(groups)} tasks)")
    # The configs travel in the task closure: standalone executors do not inherit the driver's env.
    body = functools.partial(spark_task, plan.to_json(), configs, os.environ.get(FAULT_ENV))
    # No sc.stop(): spark-submit stops the context when this driver process ends (SparkContext's JVM
    # shutdown hook, on success and failure alike). sc.stop() would first wait for pyspark's accumulator
    # server, whose handler polls its socket with a 1 s timeout: nearly that second of every batch.
    return sc.parallelize(groups, len(groups)).mapPartitions(body).collect()


def _drop_numpy_converters() -> None:
    """Unregister pyspark's two numpy input converters from py4j before the first JVM call.

    Why: py4j asks every registered converter about each Python object it hands the JVM; the numpy ones
    answer by importing ``pyspark.testing.utils``, which imports pandas, numpy and pyarrow to learn which
    are installed, in every batch's driver (its cost: docs/benchmarks.md). This job never hands the JVM a numpy value.
    """
    from py4j import protocol

    protocol.INPUT_CONVERTER[:] = [c for c in protocol.INPUT_CONVERTER
                                   if not type(c).__name__.startswith("Numpy")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plan", required=True, help="plan JSON written by the planning task")
    parser.add_argument("--report", help="where to write the report JSON (default: next to the plan)")
    parser.add_argument("--in-process", action="store_true", help="copy in this process, without Spark")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    plan = CopyPlan.read(args.plan)
    configs = load_cluster_configs()
    started_at_ms = int(time.time() * 1000)
    report_path = args.report or report_path_for(args.plan, plan)
    failure_path_for(report_path).unlink(missing_ok=True)  # a retry must not leave an earlier try's failure
    if plan.is_empty:
        report = finish_batch(plan, [], configs, started_at_ms, report_path)
    else:
        # The lease's and the report's idempotent producers start first and get their producer ids while Spark
        # starts: asked for one before its first broker connection is up, librdkafka retries 500 ms later,
        # and a producer made just before its first write would wait for that retry in every batch.
        lease = copy_lease(plan, configs)
        closing = state_clients(configs)
        sc = None if args.in_process else spark_context(plan)
        try:
            lease.acquire()  # one copy job per migration at a time, whoever started it
        except CopyLeaseHeld as exc:
            log.error("%s", exc)
            return LEASE_HELD_EXIT
        with lease:
            try:
                check_planned_topics(plan, configs)  # a topic deleted after planning fails here, before any record
                fault = os.environ.get(FAULT_ENV)
                results = (copy_plan_in_process(plan, configs, fault) if sc is None
                           else run_on_spark(sc, plan, configs))
                failure = first_failure(results)
            except Exception as exc:
                failure = failure_record(exc)
                if failure is None:
                    raise  # may heal: a non-zero exit, and the task's retry resumes exactly-once
            if failure is not None:
                # Why a file: spark-submit's exit says only "failed"; the task reads this and fails once, with it.
                write_failure(report_path, failure)
                log.error("copy failed, no retry can heal it: %s", failure["message"])
                return FAILED_EXIT
            report = finish_batch(plan, results, configs, started_at_ms, report_path, closing)
    for line in report_lines(report):
        log.info("%s", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
