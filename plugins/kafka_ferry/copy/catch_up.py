"""The copy stage's entry point for a promotion: copy batches, under the migration's copy lease, until caught up.

A promotion (whole, per group, per topic) must copy what is left without a scheduled catch-up run copying
alongside: every batch here is planned (``copy.plan``) and run while this process holds the same lease a
catch-up copy job takes, so two copiers never write one destination partition. ``caught_up`` says when to
stop: an empty plan (the whole migration), or every partition of some topics past the source end read at
the start (a group or topic moving while producers keep writing).

Engines (``RunPlan``: a plan and both clusters' configs -> one result row per partition):
  ``threads_engine``        in this process, partitions split over threads: no JVM start inside the cutover
                            window, and the per-partition fixed cost (tail read, sync and progress writes) is
                            waiting, not CPU
  ``spark_connect_engine``  on a running Spark Connect server (a session, no JVM start), same partition copier
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kafka_ferry.copy.batch_runner import run_partitions
from kafka_ferry.copy.lease import CopyLease
from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.copy.planning import plan_copy, record_accepted_gaps
from kafka_ferry.copy.runner import copy_group, task_groups
from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.state.store import MigrationStateStore

RunPlan = Callable[[CopyPlan, Mapping[str, Mapping[str, Any]]], list[dict]]


class NotCaughtUp(Retryable, RuntimeError):
    """``max_batches`` batches were copied and the copy is still not caught up (producers still running?)."""


def copy_until(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster, store: MigrationStateStore,
               run_plan: RunPlan, holder: str, caught_up: Callable[[CopyPlan], bool] = lambda plan: plan.is_empty,
               max_batches: int = 100) -> dict[str, int]:
    """Plan and run batches with ``run_plan`` until ``caught_up(plan)``; ``holder`` names this copy in the lease."""
    configs = {"source": source.client_config, "destination": destination.client_config}
    batches = records = 0
    with CopyLease(KafkaCluster("destination", configs["destination"]), store.topic, spec.name, holder):
        for _ in range(max_batches):
            plan = plan_copy(spec, source, destination, store)
            if plan.gaps:
                record_accepted_gaps(plan, store, spec.topics.rename.destination_topic)
            if caught_up(plan):
                return {"batches": batches, "records_copied": records}
            # The batch runner's run step: a failure no retry heals, even one a Spark task returned as a row,
            # is raised once as CopyFailed with its cause.
            results = run_partitions(plan, configs, lambda plan, configs, fault: run_plan(plan, configs))
            batches += 1
            records += sum(r.get("records_copied", 0) for r in results)
    raise NotCaughtUp(f"still records to copy after {max_batches} batches")


def threads_engine(workers: int = 16) -> RunPlan:
    """Copy a plan in this process, its partitions split over ``workers`` threads as over Spark tasks
    (``copy_group`` builds its own clients)."""

    def run_plan(plan: CopyPlan, configs: Mapping[str, Mapping[str, Any]]) -> list[dict]:
        groups = [[plan.task_for(t, p) for t, p in group] for group in task_groups(plan, workers)]
        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            return [row for rows in pool.map(lambda tasks: copy_group(plan, tasks, configs), groups) for row in rows]

    return run_plan


def spark_connect_engine(url: str, package_zip: Path) -> RunPlan:
    from kafka_ferry.copy.connect_engine import run_on_spark_connect  # pyspark's Connect client, only when used

    return lambda plan, configs: run_on_spark_connect(url, plan, configs, package_zip)
