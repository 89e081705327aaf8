"""Copy batches in the DAG: plan (Airflow worker) -> copy (spark-submit) -> report (Airflow worker).

Delivery guarantee: exactly-once with provenance headers (the default): a crashed or retried batch
resumes from the destination's tail, which says what was already copied. With
``copy.provenance_headers: false`` the copy is at-least-once: a retry after a crash re-copies the
records written after the last stored progress.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook, conf
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_ferry.airflow_native.announce import TopicLineage, announce_batch, batch_measured
from kafka_ferry.airflow_native.assets import copy_outlets
from kafka_ferry.copy.backlog import estimate_before_copy, estimate_lines, record_backlog
from kafka_ferry.copy.batch import finish_batch
from kafka_ferry.copy.batch_runner import clear_outputs, run_batch, staged_for_spark
from kafka_ferry.copy.copy_failures import CopyFailed, stored_failure
from kafka_ferry.copy.credentials import (
    SparkConnectionRefused,
    check_connect_server,
    check_standalone_channel,
    refuse_leaks,
    submit_credentials,
)
from kafka_ferry.copy.jvm_archive import driver_options, spark_defaults
from kafka_ferry.copy.packaging import build_package_zip, write_launcher
from kafka_ferry.copy.plan import CopyPlan, planned_files, work_dir
from kafka_ferry.copy.planning import RunWindow, plan_copy, record_accepted_gaps
from kafka_ferry.copy.report import report_lines, write_report
from kafka_ferry.core.batches.spark_credentials import SparkTarget
from kafka_ferry.core.common.dates import iso_utc
from kafka_ferry.core.specs.spec import MigrationSpec, load_spec
from kafka_ferry.core.specs.trigger_form import DRY_RUN_TEMPLATE
from kafka_ferry.hooks.kafka_cluster import kafka_cluster
from kafka_ferry.operators.base import DryRunOperator, MigrationOperator
from kafka_ferry.operators.copy_failures import copy_stopped
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.promotion.guard import assert_not_promoted
from kafka_ferry.storage.workdir import as_path, local_base, local_dir, read_text, remove
from kafka_ferry.translation.sync_log import write_heartbeat

APPLICATION_ENV = "KFERRY_COPY_APPLICATION"
# Where spark-submit runs from the repository (editable install); a packaged deployment sets the env var.
# A connection of this type (the Spark provider's) runs the batch on a long-running Spark Connect server.
SPARK_CONNECT_CONN_TYPE = "spark_connect"



class PlanCopyBatchOperator(DryRunOperator):
    """Plans the next batch from the stored offsets, writes it to the work dir and returns its summary.

    Fails without retry when source retention deleted uncopied records, naming every lost range, unless
    the spec accepts gaps: then they go to the gap ledger first. ``dry_run`` plans without recording.

    :param dry_run: plan the batch and list its ranges, record nothing (no accepted gaps); a bool or a template
        (``parse_bool`` at run time).
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``.
    """

    @fail_fast
    def execute(self, context: Any) -> dict:
        assert_not_promoted(self.state_store, self.spec_path)
        dry_run = self.is_dry_run
        # RetentionGapError is Permanent: a retry cannot bring deleted records back (fail_fast fails the task once).
        plan = plan_copy(self.spec, self.source_cluster, self.destination_cluster, self.state_store, dry_run=dry_run,
                         window=_run_window(self.spec, context, self.dag if self.has_dag() else None))
        if plan.gaps and not dry_run:
            record_accepted_gaps(plan, self.state_store, self.spec.topics.rename.destination_topic)
        path, report_path = plan.write_for(self.spec.name)
        # the paths are for people reading XCom: every task derives them again (copy.plan.planned_files)
        summary = {**plan.summary(), "dry_run": dry_run, "plan_path": str(path), "report_path": str(report_path)}
        if dry_run:  # the batch a real run would copy, range by range
            summary["ranges"] = [f"{t.source_topic}-{t.partition} [{t.start_offset}, {t.end_offset}) -> "
                                 f"{t.destination_topic}" for t in plan.tasks]
            # the same backlog and ETA the pre-flight gives (copy.backlog.estimate_before_copy), read-only
            summary["estimate"] = estimate_before_copy(self.spec, self.source_cluster, self.destination_cluster,
                                                       self.state_store, plan)
            for line in estimate_lines(summary["estimate"]):
                self.log.info("%s", line)
        self.log.info("batch %s: %d partitions, up to %d offsets%s; plan %s", plan.batch_id, summary["partitions"],
                      summary["offsets"], " (dry run: nothing will be copied)" if dry_run else "", path)
        if plan.deadline_ms is not None:
            self.log.info("window %s: deadline %s%s", plan.window, iso_utc(plan.deadline_ms),
                          " (closed: this run copies nothing)" if plan.window_closed else "")
        for task in plan.tasks:
            self.log.info("  %s-%s [%d, %d) -> %s", task.source_topic, task.partition, task.start_offset,
                          task.end_offset, task.destination_topic)
        return summary


class CopyBatchSparkOperator(TopicLineage, SparkSubmitOperator):
    """spark-submit of the packaged copy job (``copy.spark_job``) for the plan the planning task made; skipped when
    empty.

    The Spark connection's type picks the engine: ``spark`` (a master URL) runs spark-submit; ``spark_connect``
    (a running Spark Connect server) runs the same copy (``copy.batch_runner``) as a client session, without a JVM
    start per batch.

    Both clusters' client configs reach the job as ``core.batches.spark_credentials`` decides for the master and
    ``copy.credentials`` delivers: the ``KFERRY_CLUSTER_CONFIGS`` environment of the spark-submit process (local,
    spark://), a Kubernetes Secret (k8s://) or a 0600 credentials file shipped with --files and removed after the
    run (YARN) - set here at run time, never a template field, never on the command line, never in XCom. The
    package goes to executors as a zip built from the code this worker runs.

    :param spec_path: path of the migration's YAML spec, read at run time (data, never rendered).
    :param plan_task_id: task id of the planning task whose XCom summary names the plan and report paths.
    :param application: the file spark-submit runs; default: ``$KFERRY_COPY_APPLICATION`` or a launcher of the
        packaged job written to the migration's work dir.
    :param kwargs: passed to ``SparkSubmitOperator`` (``conn_id`` names the Spark connection: its type picks the
        engine; ``conf``, ``env_vars``, ``files`` are kept and extended for the run only; ``outlets``: the
        migration's copy asset alias, through which each written topic's asset event goes).

    After a batch: one asset event per mirror topic it wrote (``kafka://<host:port>/<topic>``, extra: records,
    offsets) and OpenLineage (source topics in, mirror topics out, each naming its source).
    """

    template_fields: Sequence[str] = SparkSubmitOperator.template_fields  # spec_path is data, never rendered
    ui_color = "#f8e0c8"

    def __init__(self, *, spec_path: str, plan_task_id: str = "plan_copy", application: str | None = None,
                 **kwargs) -> None:
        kwargs.setdefault("name", "kafka-ferry-copy")
        super().__init__(application=application or "", **kwargs)
        self.spec_path = spec_path
        self.plan_task_id = plan_task_id

    @fail_fast
    def execute(self, context: Any) -> None:
        spec = load_spec(self.spec_path)
        summary = _derived_paths(spec.name, _planned_batch(context["ti"].xcom_pull(task_ids=self.plan_task_id)))
        connection = BaseHook.get_connection(self._conn_id)
        try:
            # the run's page shows the batch's progress while it runs (copy.live_progress)
            with self._live_progress(spec, summary, context):
                if connection.conn_type == SPARK_CONNECT_CONN_TYPE:
                    self._copy_on_spark_connect(spec, summary)
                else:
                    self._spark_submit(spec, summary, connection, context)
        except CopyFailed as exc:  # completed with what the registry knows; fail_fast fails the task once
            raise copy_stopped(spec, summary, exc.record, str(context.get("run_id") or "")) from exc
        self._announce(context, spec, summary)

    def _announce(self, context: Any, spec: MigrationSpec, summary: dict) -> None:
        """The batch's asset events and lineage, from the report the copy wrote (after the copy is durable)."""
        report_path = as_path(summary["report_path"])  # in the work dir: local or object storage
        if not report_path.exists():
            return  # the report task fails on it, naming the path
        report = json.loads(read_text(report_path))
        events = announce_batch(context, self, kafka_cluster(spec.source.connection_id).bootstrap_servers,
                                kafka_cluster(spec.destination.connection_id).bootstrap_servers, report)
        for uri, extra in events.items():
            self.log.info("asset event %s: %d records", uri, extra["records"])

    def _live_progress(self, spec: MigrationSpec, summary: dict, context: Any):
        """Rewrites the run's page with the batch's progress while the body runs."""
        from kafka_ferry.copy.live_progress import live_progress_page
        from kafka_ferry.state.store import MigrationStateStore

        try:
            plan = CopyPlan.read(summary["plan_path"])
            store = MigrationStateStore(kafka_cluster(spec.destination.connection_id), spec.state_topic_name)
        except Exception as exc:  # the page is a view: the copy itself reads the plan and fails with its cause
            self.log.warning("no live progress page for batch %s: %s", summary.get("batch_id"), exc)
            return nullcontext()
        return live_progress_page(plan, store, work_dir(spec.name), str(context.get("run_id") or summary["batch_id"]))

    def _spark_submit(self, spec: MigrationSpec, summary: dict, connection: Any, context: Any) -> None:
        """One spark-submit of the job; the operator's public attributes are this run's only while it runs."""
        master = (connection.host or "").strip()  # the local[*] check; delivery reads the hook's resolution
        target = self._resolved_target()
        # the conf the job runs with: spark-defaults.conf of spark-submit's environment, under the task's own
        check_standalone_channel(self._conn_id, target, {**spark_defaults({**os.environ, **(self.env_vars or {})}),
                                                         **(self.conf or {})})
        packages = local_dir(spec.name) / "packages"  # spark-submit is handed local files
        self.application = self.application or _application(packages)
        self.py_files = ",".join(filter(None, [str(build_package_zip(packages)), self.py_files]))
        self.name = f"kafka-ferry {spec.name} {summary['batch_id']}"
        deploy_mode = self._deploy_mode or connection.extra_dejson.get("deploy-mode")
        with (self._attributes_restored(),
              staged_for_spark(spec.name, summary["plan_path"], summary["report_path"]) as (plan, report),
              submit_credentials(self._conn_id, target, spec.copy_settings,
                                 lambda: _cluster_configs(spec)) as credentials,
              driver_options(local_base(), spec.copy_settings.fast_driver_start, master, deploy_mode,
                             self.conf, self.env_vars) as (driver_conf, driver_env)):
            self.application_args = ["--plan", str(plan), "--report", str(report)]
            self.env_vars = {**_local_python(master, self.env_vars), **driver_env, **credentials.env}
            self.conf = {**(self.conf or {}), **credentials.conf, **driver_conf}
            self.files = ",".join(filter(None, [*credentials.files, self.files]))
            _put_spark_submit_on_path()
            self._hook = self._get_hook()
            refuse_leaks(self._conn_id, self._hook, self.application, credentials)
            clear_outputs(summary["report_path"])  # the report task must never read a stale report or failure
            try:
                super().execute(context)
            except Exception:
                record = stored_failure(report)  # the local one (copied back to the work dir after)
                if record is None:
                    raise  # may heal (the job crashed, a broker was down): the task's retries resume it
                raise CopyFailed(record) from None

    def on_kill(self) -> None:
        """The provider's ``on_kill`` (a cluster driver's kill, a Kubernetes pod's deletion) and the end of everything
        the spark-submit process started: the provider SIGKILLs that process alone, which orphans its Python driver
        (local and client mode) and the executors' Python workers. A worker's Task SDK supervisor that signals the
        task's process group reaches them anyway; a task run in the calling process (``dag.test``, as `kafka-ferry`
        runs a spec's DAG) or by a supervisor that signals the task alone does not, and they ran on after the kill.
        They are seen before the kill and ended after it (``process_tree``)."""
        from kafka_ferry.process_tree import descendants, end_processes

        submitted = getattr(getattr(self, "_hook", None), "_submit_sp", None)
        below = descendants(submitted.pid) if submitted is not None and submitted.poll() is None else []
        super().on_kill()
        end_processes(below, timeout_s=5.0)

    @contextmanager
    def _attributes_restored(self) -> Iterator[None]:
        """Whatever happens: env_vars, conf and files come back as configured, and the hook (it holds the env) goes."""
        public = (self.env_vars, self.conf, self.files)
        try:
            yield
        finally:
            self.env_vars, self.conf, self.files = public
            self._hook = None

    def _resolved_target(self) -> SparkTarget:
        """The master as the hook that submits resolves and classifies it (the provider's own rules)."""
        try:
            probe = self._get_hook()
        except Exception as exc:  # the provider refuses the connection (e.g. a k8s master without its client)
            raise SparkConnectionRefused(self._conn_id, str(exc)) from None
        resolved = probe._connection
        return SparkTarget(resolved["master"], probe._is_yarn, probe._is_kubernetes, resolved.get("deploy_mode"))

    def _copy_on_spark_connect(self, spec: MigrationSpec, summary: dict) -> None:
        """The batch as a session on a running Spark Connect server: no JVM start; this task is the client."""
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        from kafka_ferry.copy.connect_engine import connect_batch_engine

        url = SparkConnectHook(self._conn_id).get_connection_url()
        check_connect_server(self._conn_id, url)  # before any client is made: the configs go to that server
        plan = CopyPlan.read(summary["plan_path"])
        remove(as_path(summary["report_path"]))  # the report task must never read a stale one
        self.log.info("batch %s on Spark Connect (connection '%s'): %d partitions", plan.batch_id, self._conn_id,
                      len(plan.tasks))
        run_batch(plan, _cluster_configs(spec), functools.partial(connect_batch_engine, url,
                                                                  local_dir(spec.name) / "packages"),
                  summary["report_path"], logger=self.log)


def _run_window(spec: MigrationSpec, context: Any, dag: Any) -> RunWindow | None:
    """What ``copy.window`` counts from: the run's due time (``run_after``: a retried or late task gets no fresh
    window) and the DAG's timezone (Airflow's default_timezone for a DAG without one of its own)."""
    if spec.copy_settings.window is None:
        return None
    run = context.get("dag_run") if hasattr(context, "get") else None
    due = getattr(run, "run_after", None) or getattr(run, "logical_date", None)
    due_ms = int(due.timestamp() * 1000) if due is not None else int(time.time() * 1000)
    tz = getattr(getattr(dag, "timezone", None), "name", None) or conf.get("core", "default_timezone",
                                                                          fallback="UTC")
    return RunWindow(due_ms, str(tz))


def _planned_batch(summary: dict | None) -> dict:
    """The planning task's summary of a batch to copy; the copy is skipped for an empty plan or a dry run."""
    if not summary or summary.get("empty") or summary.get("dry_run"):
        reason = ("dry run" if summary and summary.get("dry_run") else
                  "the window's deadline has passed" if summary and summary.get("window_closed") else
                  "nothing to copy")
        raise AirflowSkipException(f"{reason}: batch {summary.get('batch_id') if summary else '?'}")
    return summary


def _derived_paths(migration: str, summary: dict) -> dict:
    """The summary with its plan and report paths as ``copy.plan.planned_files`` derives them from the spec and the
    batch id (``BatchFileRefused``, Permanent, when XCom named others): the only paths the tasks below use."""
    plan, report = planned_files(migration, summary)
    return {**summary, "plan_path": str(plan), "report_path": str(report)}


def _cluster_configs(spec: MigrationSpec) -> dict[str, dict]:
    return {"source": kafka_cluster(spec.source.connection_id).client_config,
            "destination": kafka_cluster(spec.destination.connection_id).client_config}


def _local_python(master: str, env_vars: dict | None) -> dict:
    env = dict(env_vars or {})
    if master.startswith("local") and "PYSPARK_PYTHON" not in env and "PYSPARK_PYTHON" not in os.environ:
        env["PYSPARK_PYTHON"] = sys.executable  # local executors: this worker's Python has confluent-kafka
    return env


def _put_spark_submit_on_path() -> None:
    """SparkSubmitHook runs `spark-submit` from PATH; in an unactivated venv that is pyspark's, next to Python."""
    if shutil.which("spark-submit") is None:
        bin_dir = str(Path(sys.executable).parent)
        os.environ["PATH"] = os.pathsep.join(filter(None, [bin_dir, os.environ.get("PATH")]))


def _application(out_dir: Path) -> str:
    """The file spark-submit runs: an override, else a launcher of the packaged job (no repository needed)."""
    return os.environ.get(APPLICATION_ENV) or str(write_launcher(out_dir))


class CopyReportOperator(MigrationOperator):
    """Logs and returns the batch report (records, bytes, lag before/after, syncs, gaps, duration).

    Runs also when the copy was skipped (nothing to copy): the report then says so, with the lag.

    :param plan_task_id: task id of the planning task whose XCom summary names the batch, its plan and its report.
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``. The trigger rule defaults
        to ``none_failed_min_one_success``: it reports a skipped (empty) copy too.
    """

    def __init__(self, *, plan_task_id: str = "plan_copy", **kwargs) -> None:
        # After plan_copy and copy_batch: reports a skipped (empty) copy, is skipped when the branch skips both.
        kwargs.setdefault("trigger_rule", "none_failed_min_one_success")
        super().__init__(**kwargs)
        self.plan_task_id = plan_task_id

    @fail_fast
    def execute(self, context: Any) -> dict:
        summary = context["ti"].xcom_pull(task_ids=self.plan_task_id)
        if not summary:
            raise AirflowFailException(f"no plan from task '{self.plan_task_id}'")
        if summary.get("dry_run"):
            self.log.info("dry run: batch %s would copy up to %d offsets of %d partitions; nothing recorded",
                          summary["batch_id"], summary["offsets"], summary["partitions"])
            return summary
        summary = _derived_paths(self.spec.name, summary)
        # The backlog record is this task's first write: its producer asks for its id now, while the report is read
        # (librdkafka asks on a fixed timer after a producer is made: ``KafkaCluster.start_durable_producer``).
        self.destination_cluster.start_durable_producer()  # the cluster the state store writes through
        report_path = as_path(summary["report_path"])
        if summary["empty"]:
            plan = CopyPlan.read(summary["plan_path"])
            configs = {"source": self.source_cluster.client_config,
                       "destination": self.destination_cluster.client_config}
            report = finish_batch(plan, [], configs, plan.planned_at_ms, report_path, self.destination_cluster)
        elif report_path.exists():
            report = json.loads(read_text(report_path))
        else:
            raise AirflowFailException(f"the copy job wrote no report at {report_path}")
        for line in report_lines(report):
            self.log.info("%s", line)
        # backlog, rate and ETA over the migration's runs: a state record (kind "backlog") and the report's section
        report["backlog"] = record_backlog(self.spec, report, self.state_store)
        write_report(report, report_path)
        self.log.info("backlog %s -> %s offsets; %s", report["backlog"]["backlog_before"],
                      report["backlog"]["backlog_after"], report["backlog"]["sentence"])
        batch_measured(report)
        write_heartbeat(self.spec, self.destination_cluster, int(report.get("finished_at_ms") or 0))
        return {**{k: v for k, v in report.items() if k not in ("partitions", "lag_before", "lag_after", "backlog")},
                "backlog": {k: v for k, v in report["backlog"].items() if k != "history"}}


def copy_batch_tasks(spec, spec_path: str) -> tuple[PlanCopyBatchOperator, CopyBatchSparkOperator,
                                                      CopyReportOperator]:
    """The catch-up copy of a migration DAG: ``plan_copy >> copy_batch >> copy_report`` (call inside a DAG)."""
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path, dry_run=DRY_RUN_TEMPLATE)
    copy = CopyBatchSparkOperator(task_id="copy_batch", spec_path=spec_path,
                                  conn_id=spec.copy_settings.spark_connection_id, outlets=copy_outlets(spec.name),
                                  execution_timeout=timedelta(seconds=spec.timeouts.copy_seconds))
    report = CopyReportOperator(task_id="copy_report", spec_path=spec_path)
    plan >> copy >> report
    plan >> report  # so an empty batch (copy skipped) still reports
    return plan, copy, report
