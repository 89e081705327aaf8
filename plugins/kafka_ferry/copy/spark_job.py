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
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from kafka_ferry.copy.batch import report_path_for
from kafka_ferry.copy.batch_runner import RunTasks, in_process_engine, run_batch
from kafka_ferry.copy.copy_failures import CopyFailed, failure_path_for, write_failure
from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.copy.runner import spark_task, task_groups
from kafka_ferry.core.batches.copy_lease import CopyLeaseHeld
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


@contextmanager
def spark_engine(plan: CopyPlan) -> Iterator[RunTasks]:
    """The spark-submit engine: this driver's SparkContext runs the partition tasks."""
    sc = spark_context(plan)
    yield lambda plan, configs, fault: run_on_spark(sc, plan, configs, fault)


def run_on_spark(sc, plan: CopyPlan, configs: Mapping[str, Mapping[str, Any]], fault: str | None = None) -> list[dict]:
    groups = task_groups(plan, sc.defaultParallelism)
    sc.setJobDescription(f"kafka-ferry copy: migration {plan.migration}, batch {plan.batch_id} "
                         f"({len(plan.tasks)} partitions in {len(groups)} tasks)")
    # The configs travel in the task closure: standalone executors do not inherit the driver's env.
    body = functools.partial(spark_task, plan.to_json(), configs, fault)
    # No sc.stop(): spark-submit stops the context when this driver process ends (SparkContext's JVM
    # shutdown hook, on success and failure alike). sc.stop() would first wait for pyspark's accumulator
    # server, whose handler polls its socket with a timeout: that wait in every batch.
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
    report_path = args.report or report_path_for(args.plan, plan)
    failure_path_for(report_path).unlink(missing_ok=True)  # a retry must not leave an earlier try's failure
    engine = in_process_engine if args.in_process else functools.partial(spark_engine, plan)
    try:
        run_batch(plan, load_cluster_configs(), engine, report_path)
    except CopyLeaseHeld as exc:
        log.error("%s", exc)
        return LEASE_HELD_EXIT
    except CopyFailed as exc:
        # Why a file: spark-submit's exit says only "failed"; the task reads this and fails once, with it.
        write_failure(report_path, exc.record)
        log.error("copy failed, no retry can heal it: %s", exc.record["message"])
        return FAILED_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
