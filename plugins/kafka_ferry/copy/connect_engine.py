"""Run a copy plan on a long-running Spark Connect server instead of a spark-submit job.

Why: spark-submit starts a JVM and a SparkContext for every batch. A Connect server is started once;
a batch is then a short client session: the package zip goes up as a session artifact (the server's
Python workers import exactly the code this worker runs), and one ``mapInArrow`` stage runs the same
``copy_group`` the spark-submit job runs, one group of whole partitions per Spark partition. Record
data stays inside the Python workers; only per-partition result rows come back.

Delivery is unchanged: each group copies with the same copier, progress written only after acks, so a
failed or retried batch resumes exactly-once from the destination's tail, whatever the engine.

Credentials: both clusters' configs travel in the pickled function, over the Connect channel, to the
server's Python workers (as they travel in the task closure to executors with spark-submit); never on
a command line. Outside loopback the channel must use TLS and a token (``use_ssl`` / password of the
``spark_connect`` connection).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.copy.runner import spark_task, task_groups

RESULT_SCHEMA = "result string"
CONNECT_MODE_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")
DEFAULT_PARALLELISM = 2


def run_on_spark_connect(url: str, plan: CopyPlan, configs: Mapping[str, Mapping[str, Any]], package_zip: Path,
                         fault_spec: str | None = None) -> list[dict]:
    """Copy the plan's partitions on the Connect server at ``url``; one result dict per partition."""
    from pyspark.sql import SparkSession

    before = {name: os.environ.get(name) for name in CONNECT_MODE_ENV}
    spark = SparkSession.builder.remote(url).getOrCreate()
    try:
        spark.addArtifacts(str(package_zip), pyfile=True)
        groups = task_groups(plan, _parallelism(spark))
        body = _group_copier(plan.to_json(), {k: dict(v) for k, v in configs.items()}, fault_spec, groups)
        # range(n, numPartitions=n): exactly one group index per Spark partition, so one task per group.
        rows = spark.range(0, len(groups), 1, len(groups)).mapInArrow(body, RESULT_SCHEMA).collect()
        return [json.loads(row.result) for row in rows]
    finally:
        spark.stop()
        # Why: pyspark marks the whole process as a Connect client (SPARK_CONNECT_MODE_ENABLED) and does not
        # unmark it on stop; any later SparkContext here or in a child (a spark-submit batch) would refuse to start.
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _parallelism(spark) -> int:
    """Tasks to spread partitions over: the server's default parallelism (its cores on local[N])."""
    value = spark.conf.get("spark.default.parallelism", None)
    return int(value) if value else DEFAULT_PARALLELISM


def _group_copier(plan_json: str, configs: dict, fault_spec: str | None, groups: list[list[tuple[str, int]]]):
    """The ``mapInArrow`` body: copies the groups whose indexes arrive, yields one JSON row per partition."""

    def copy_groups(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            chosen = [groups[i] for i in batch.column("id").to_pylist()]
            results = list(spark_task(plan_json, configs, fault_spec, chosen))
            yield pa.RecordBatch.from_pydict({"result": [json.dumps(r, sort_keys=True) for r in results]})

    return copy_groups
