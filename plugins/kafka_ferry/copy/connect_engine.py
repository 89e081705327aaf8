"""Run a copy plan on a long-running Spark Connect server instead of a spark-submit job.

Why: spark-submit starts a JVM and a SparkContext for every batch. A Connect server is started once;
a batch is then a short client session: the package zip goes up as a session artifact (the server's
Python workers import exactly the code this worker runs), and one ``mapInArrow`` stage runs the same
``copy_group`` the spark-submit job runs, one group of whole partitions per Spark partition. Record
data stays inside the Python workers; only per-partition result rows come back.

Delivery is unchanged: each group copies with the same copier, progress written only after acks, so a
failed or retried batch resumes exactly-once from the destination's tail, whatever the engine.

One session per migration and package, kept between batches: a Connect server (Spark 4.2) starts a
Python daemon and workers for each session, seconds before the first record, and never stops the daemon
when the session ends (one process left behind per session; figures: docs/benchmarks.md). Re-attaching
to the same session id (``session_id=`` in the URL, the id kept in a file beside the package zip) reuses
that session's workers:
a batch starts copying at once and the server holds one daemon per migration. A new package version gets
a new session (its workers must import the new code); a session the server closed (idle timeout, restart
with a tombstone) is replaced once by a new id. Nothing else lives in the session: plan, configs and
fault spec arrive with every batch, in the function.

Credentials: both clusters' configs travel in the pickled function, over the Connect channel, to the
server's Python workers (as they travel in the task closure to executors with spark-submit); never on
a command line. Outside loopback the channel must use TLS and a token (``use_ssl`` / password of the
``spark_connect`` connection).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kafka_ferry.copy.packaging import build_package_zip
from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.copy.runner import spark_task, task_groups
from kafka_ferry.core.batches.spark_credentials import check_connect_url

RESULT_SCHEMA = "result string"
CONNECT_MODE_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")
DEFAULT_PARALLELISM = 2
SESSION_CLOSED = "INVALID_HANDLE.SESSION_CLOSED"
SESSION_FILE_SUFFIX = ".connect-session"


def run_on_spark_connect(url: str, plan: CopyPlan, configs: Mapping[str, Mapping[str, Any]], package_zip: Path,
                         fault_spec: str | None = None) -> list[dict]:
    """Copy the plan's partitions on the Connect server at ``url``; one result dict per partition."""
    with connect_session(url, package_zip) as spark:
        return copy_on_session(spark, plan, configs, fault_spec)


@contextmanager
def connect_batch_engine(url: str, packages_dir: Path) -> Iterator[Callable[..., list[dict]]]:
    """The Spark Connect engine of ``batch_runner.run_batch``: the package built from the code this worker runs,
    the migration's kept session attached; the partition tasks run as one stage of it."""
    package_zip = build_package_zip(packages_dir)
    with connect_session(url, package_zip) as spark:
        yield lambda plan, configs, fault: copy_on_session(spark, plan, configs, fault)


@contextmanager
def connect_session(url: str, package_zip: Path) -> Iterator[Any]:
    """The migration's kept session on the server at ``url``, the package added; detached (not released) after."""
    check_connect_url(url)  # before any config is pickled: off the loopback only over TLS with a token
    with connect_mode_restored():
        spark = _attach(url, package_zip)
        try:
            yield spark
        finally:
            _detach(spark)


@contextmanager
def connect_mode_restored() -> Iterator[None]:
    """Any pyspark Connect client made inside leaves this process's environment as it found it.

    Why: pyspark marks the whole process as a Connect client (SPARK_CONNECT_MODE_ENABLED) and does not unmark it
    on stop; any later SparkContext here or in a child (a spark-submit batch) would refuse to start.
    """
    before = {name: os.environ.get(name) for name in CONNECT_MODE_ENV}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def copy_on_session(spark, plan: CopyPlan, configs: Mapping[str, Mapping[str, Any]],
                    fault_spec: str | None = None) -> list[dict]:
    """One ``mapInArrow`` stage over the plan's task groups; one result dict per partition."""
    groups = task_groups(plan, _parallelism(spark))
    body = _group_copier(plan.to_json(), {k: dict(v) for k, v in configs.items()}, fault_spec, groups)
    # range(n, numPartitions=n): exactly one group index per Spark partition, so one task per group.
    rows = spark.range(0, len(groups), 1, len(groups)).mapInArrow(body, RESULT_SCHEMA).collect()
    return [json.loads(row.result) for row in rows]


def session_url(url: str, session_id: str) -> str:
    """``url`` naming the session to attach to; a URL that already names one is the operator's choice."""
    if "session_id=" in url:
        return url
    if "/;" in url:
        return f"{url};session_id={session_id}"
    return f"{url.rstrip('/')}/;session_id={session_id}"  # the hook ends a URL without parameters with "/"


def session_file(package_zip: Path) -> Path:
    """Where the session id for this package is kept: beside the zip, in the migration's work dir."""
    return package_zip.with_name(package_zip.name + SESSION_FILE_SUFFIX)


def kept_session_id(path: Path, renew: bool = False) -> str:
    """The session id kept at ``path``; a new one (written atomically) when there is none, it is torn, or ``renew``."""
    if not renew:
        try:
            return str(uuid.UUID(path.read_text().strip()))
        except (OSError, ValueError):
            pass
    session_id = str(uuid.uuid4())
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(session_id)
    tmp.replace(path)
    return session_id


def _attach(url: str, package_zip: Path):
    """A client on the migration's kept session, with the package added (again: same content is a no-op)."""
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    record = session_file(package_zip)
    spark = SparkSession.builder.remote(session_url(url, kept_session_id(record))).create()
    try:
        spark.addArtifacts(str(package_zip), pyfile=True)  # the first call to the server
        return spark
    except PySparkException as exc:
        if exc.getCondition() != SESSION_CLOSED:
            _detach(spark)
            raise
    # The server closed the kept session (idle timeout, or released) and refuses its id from now on.
    _detach(spark)
    spark = SparkSession.builder.remote(session_url(url, kept_session_id(record, renew=True))).create()
    try:
        spark.addArtifacts(str(package_zip), pyfile=True)
    except BaseException:
        _detach(spark)
        raise
    return spark


def _detach(spark) -> None:
    """Close this client without releasing the session: the next batch attaches to it and its warm workers."""
    spark.release_session_on_close = False
    spark.stop()


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
