"""Copy batches in the DAG: plan (Airflow worker) -> copy (spark-submit) -> report (Airflow worker).

Delivery guarantee: exactly-once with provenance headers (the default): a crashed or retried batch
resumes from the destination's tail, which says what was already copied. With
``copy.provenance_headers: false`` the copy is at-least-once: a retry after a crash re-copies the
records written after the last stored progress.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_ferry.copy.batch import finish_batch, report_path_for, state_clients
from kafka_ferry.copy.copy_failures import failure_path_for, failure_record, first_failure, stored_failure
from kafka_ferry.copy.faults import FAULT_ENV
from kafka_ferry.copy.jvm_archive import DriverArchive
from kafka_ferry.copy.lease import copy_lease
from kafka_ferry.copy.packaging import build_package_zip, write_launcher
from kafka_ferry.copy.plan import CopyPlan, work_dir
from kafka_ferry.copy.planning import plan_copy, record_accepted_gaps
from kafka_ferry.copy.report import report_lines
from kafka_ferry.copy.runner import check_planned_topics
from kafka_ferry.core.driver_jvm import DRIVER_OPTIONS_CONF, DriverStart
from kafka_ferry.core.flags import parse_bool
from kafka_ferry.core.spark_credentials import (
    CREDENTIALS_FILE_NAME,
    InsecureChannelRefused,
    SparkTarget,
    check_connect_url,
    delivery_for,
    secret_values,
)
from kafka_ferry.core.spec import load_spec
from kafka_ferry.core.trigger_form import DRY_RUN_TEMPLATE
from kafka_ferry.hooks.kafka_cluster import kafka_cluster
from kafka_ferry.kafka.configs import CLUSTER_CONFIGS_ENV, encode_cluster_configs
from kafka_ferry.operators.base import MigrationOperator
from kafka_ferry.operators.copy_failure import fail_copy
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.promotion.guard import assert_not_promoted
from kafka_ferry.translation.sync_log import write_heartbeat

APPLICATION_ENV = "KFERRY_COPY_APPLICATION"
# Where spark-submit runs from the repository (editable install); a packaged deployment sets the env var.
# A connection of this type (the Spark provider's) runs the batch on a long-running Spark Connect server.
SPARK_CONNECT_CONN_TYPE = "spark_connect"



class PlanCopyBatchOperator(MigrationOperator):
    """Plans the next batch from the stored offsets, writes it to the work dir and returns its summary.

    Fails without retry when source retention deleted uncopied records, naming every lost range, unless
    the spec accepts gaps: then they go to the gap ledger first. ``dry_run`` plans without recording.
    """

    template_fields = (*MigrationOperator.template_fields, "dry_run")

    def __init__(self, *, dry_run: bool | str = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.dry_run = dry_run

    @fail_fast
    def execute(self, context: Any) -> dict:
        assert_not_promoted(self.state_store)
        dry_run = parse_bool(self.dry_run)
        # RetentionGapError is Permanent: a retry cannot bring deleted records back (fail_fast fails the task once).
        plan = plan_copy(self.spec, self.source_cluster, self.destination_cluster, self.state_store, dry_run=dry_run)
        if plan.gaps and not dry_run:
            record_accepted_gaps(plan, self.state_store, self.spec.topics.rename.destination_topic)
        path = plan.write(work_dir(self.spec.name))
        summary = {**plan.summary(), "dry_run": dry_run, "plan_path": str(path),
                   "report_path": str(report_path_for(path, plan))}
        if dry_run:  # the batch a real run would copy, range by range
            summary["ranges"] = [f"{t.source_topic}-{t.partition} [{t.start_offset}, {t.end_offset}) -> "
                                 f"{t.destination_topic}" for t in plan.tasks]
        self.log.info("batch %s: %d partitions, up to %d offsets%s; plan %s", plan.batch_id, summary["partitions"],
                      summary["offsets"], " (dry run: nothing will be copied)" if dry_run else "", path)
        for task in plan.tasks:
            self.log.info("  %s-%s [%d, %d) -> %s", task.source_topic, task.partition, task.start_offset,
                          task.end_offset, task.destination_topic)
        return summary


class CopyBatchSparkOperator(SparkSubmitOperator):
    """spark-submit of the packaged copy job (``copy.spark_job``) for the plan the planning task made; skipped when
    empty.

    The Spark connection's type picks the engine: ``spark`` (a master URL) runs spark-submit; ``spark_connect``
    (a running Spark Connect server) runs the same copy as a client session, without a JVM start per batch.

    Both clusters' client configs reach the job as ``core.spark_credentials`` says for the master: the
    ``KFERRY_CLUSTER_CONFIGS`` environment of the spark-submit process (local, spark://), a Kubernetes
    Secret (k8s://) or a 0600 credentials file shipped with --files and removed after the run (YARN) - set
    here at run time, never a template field, never on the command line, never in XCom. The package goes
    to executors as a zip built from the code this worker runs.
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
        summary = context["ti"].xcom_pull(task_ids=self.plan_task_id)
        if not summary or summary.get("empty") or summary.get("dry_run"):
            reason = "dry run" if summary and summary.get("dry_run") else "nothing to copy"
            raise AirflowSkipException(f"{reason}: batch {summary.get('batch_id') if summary else '?'}")
        spec = load_spec(self.spec_path)
        connection = BaseHook.get_connection(self._conn_id)
        if connection.conn_type == SPARK_CONNECT_CONN_TYPE:
            self._copy_on_spark_connect(spec, summary, str(context.get("run_id") or ""))
            return
        master = (connection.host or "").strip()  # the local[*] check below; delivery reads the hook's resolution
        packages = work_dir(spec.name) / "packages"
        self.application = self.application or _application(packages)
        self.application_args = ["--plan", summary["plan_path"], "--report", summary["report_path"]]
        package = build_package_zip(packages)
        self.py_files = ",".join(filter(None, [str(package), self.py_files]))
        self.name = f"kafka-ferry {spec.name} {summary['batch_id']}"
        public = (self.env_vars, self.conf, self.files)
        env = dict(self.env_vars or {})
        if master.startswith("local") and "PYSPARK_PYTHON" not in env and "PYSPARK_PYTHON" not in os.environ:
            env["PYSPARK_PYTHON"] = sys.executable  # local executors: this worker's Python has confluent-kafka
        credentials_dir = Path(tempfile.mkdtemp(prefix="kferry-credentials-"))  # 0700, this run only
        archive = driver = None
        succeeded = False
        try:  # from here on, whatever fails: the public attributes come back and the credentials dir goes
            target = self._resolved_target()
            try:
                delivery = delivery_for(target, spec.copy_settings.kubernetes_credentials_secret,
                                        credentials_dir / CREDENTIALS_FILE_NAME, spec.copy_settings.credentials_file)
            except ValueError as exc:
                raise AirflowFailException(f"Spark connection '{self._conn_id}': {exc}") from None
            secret_env, secrets = {}, []
            if delivery.needs_secret_env or delivery.needs_file:
                configs = {"source": kafka_cluster(spec.source.connection_id).client_config,
                           "destination": kafka_cluster(spec.destination.connection_id).client_config}
                secrets = [*secret_values(configs), secret := encode_cluster_configs(**configs)]
                if delivery.needs_file:
                    _write_private(credentials_dir / CREDENTIALS_FILE_NAME, secret)
                else:
                    secret_env = {CLUSTER_CONFIGS_ENV: secret}
            self.env_vars = {**env, **delivery.env, **secret_env}
            deploy_mode = self._deploy_mode or connection.extra_dejson.get("deploy-mode")
            archive, driver = self._driver_start(spec, master, deploy_mode)
            self.conf = {**(self.conf or {}), **delivery.conf,
                         **({DRIVER_OPTIONS_CONF: driver.java_options} if driver else {})}
            self.files = ",".join(filter(None, [*delivery.files, self.files]))
            _put_spark_submit_on_path()
            self._hook = self._get_hook()
            self._refuse_leaks(target, secrets)
            Path(summary["report_path"]).unlink(missing_ok=True)  # the report task must never read a stale one
            failure_path_for(summary["report_path"]).unlink(missing_ok=True)
            try:
                super().execute(context)
            except Exception:
                record = stored_failure(summary["report_path"])
                if record is None:
                    raise  # may heal (the job crashed, a broker was down): the task's retries resume it
                fail_copy(spec, summary, record, str(context.get("run_id") or ""))
            succeeded = True
        finally:
            if archive is not None:
                archive.settle(driver, succeeded)
            self.env_vars, self.conf, self.files = public
            self._hook = None  # the hook holds the env; do not keep it past the run
            shutil.rmtree(credentials_dir, ignore_errors=True)  # the credentials file lives for the run only

    def _resolved_target(self) -> SparkTarget:
        """The master as the hook that submits resolves and classifies it (the provider's own rules)."""
        try:
            probe = self._get_hook()
        except Exception as exc:  # the provider refuses the connection (e.g. a k8s master without its client)
            raise AirflowFailException(f"Spark connection '{self._conn_id}': {exc}") from None
        resolved = probe._connection
        return SparkTarget(resolved["master"], probe._is_yarn, probe._is_kubernetes, resolved.get("deploy_mode"))

    def _refuse_leaks(self, target: SparkTarget, secrets: list[str]) -> None:
        """Invariant before submitting: the command the hook will run, and the env it would copy into Spark conf,
        hold no secret; and the hook classifies the master as the delivery was decided for."""
        hook = self._hook
        if (hook._is_yarn, hook._is_kubernetes) != (target.provider_yarn, target.provider_kubernetes):
            raise AirflowFailException(f"Spark connection '{self._conn_id}': the master changed while submitting")
        command = " ".join(hook._build_spark_submit_command(self.application))
        if any(s in command for s in secrets):
            raise AirflowFailException(f"Spark connection '{self._conn_id}': refused to submit: a credential would "
                                       f"be on the spark-submit command line for master {target.master!r}")

    def _copy_on_spark_connect(self, spec, summary: dict, run_id: str = "") -> None:
        """The batch as a session on a running Spark Connect server: no JVM start; this task is the client."""
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        from kafka_ferry.copy.connect_engine import connect_session, copy_on_session

        url = SparkConnectHook(self._conn_id).get_connection_url()
        try:
            check_connect_url(url)  # before any client is made: the configs go to that server
        except InsecureChannelRefused as exc:
            raise AirflowFailException(f"Spark connection '{self._conn_id}': {exc}") from None
        plan = CopyPlan.read(summary["plan_path"])
        configs = {"source": kafka_cluster(spec.source.connection_id).client_config,
                   "destination": kafka_cluster(spec.destination.connection_id).client_config}
        report_path = Path(summary["report_path"])
        report_path.unlink(missing_ok=True)  # the report task must never read a stale one
        started_at_ms = int(time.time() * 1000)
        # The lease's and the report's producers first: they get their producer ids while the session attaches
        # (copy.spark_job says why that saves 0.5 s); the lease is claimed once the session is there.
        lease = copy_lease(plan, configs)
        closing = state_clients(configs)
        package = build_package_zip(work_dir(spec.name) / "packages")
        self.log.info("batch %s on Spark Connect (connection '%s'): %d partitions", plan.batch_id, self._conn_id,
                      len(plan.tasks))
        failure = None
        with connect_session(url, package) as spark:
            with lease:  # one copy job per migration at a time, whoever started it
                try:
                    check_planned_topics(plan, configs)  # a topic deleted after planning: nothing copied
                    results = copy_on_session(spark, plan, configs, os.environ.get(FAULT_ENV))
                    failure = first_failure(results)  # a Spark task's failure no retry heals, as a row
                except Exception as exc:
                    failure = failure_record(exc)
                    if failure is None:
                        raise
                if failure is None:
                    report = finish_batch(plan, results, configs, started_at_ms, report_path, closing)
        if failure is not None:
            fail_copy(spec, summary, failure, run_id)
        for line in report_lines(report):
            self.log.info("%s", line)

    def _driver_start(self, spec, master: str, deploy_mode: str | None
                      ) -> tuple[DriverArchive | None, DriverStart | None]:
        """The driver JVM's start options (``core.driver_jvm``), unless the spec turns them off."""
        if not spec.copy_settings.fast_driver_start:
            return None, None
        archive = DriverArchive(work_dir(spec.name).parent)
        theirs = (self.conf or {}).get(DRIVER_OPTIONS_CONF) or archive.spark_defaults().get(DRIVER_OPTIONS_CONF)
        return archive, archive.start(master, deploy_mode, theirs)


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


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
        report_path = Path(summary["report_path"])
        if summary["empty"]:
            plan = CopyPlan.read(summary["plan_path"])
            configs = {"source": self.source_cluster.client_config,
                       "destination": self.destination_cluster.client_config}
            report = finish_batch(plan, [], configs, plan.planned_at_ms, report_path, self.destination_cluster)
        elif report_path.exists():
            report = json.loads(report_path.read_text())
        else:
            raise AirflowFailException(f"the copy job wrote no report at {report_path}")
        for line in report_lines(report):
            self.log.info("%s", line)
        write_heartbeat(self.spec, self.destination_cluster, int(report.get("finished_at_ms") or 0))
        return {k: v for k, v in report.items() if k not in ("partitions", "lag_before", "lag_after")}


def copy_batch_tasks(spec, spec_path: str) -> tuple[PlanCopyBatchOperator, CopyBatchSparkOperator,
                                                      CopyReportOperator]:
    """The catch-up copy of a migration DAG: ``plan_copy >> copy_batch >> copy_report`` (call inside a DAG)."""
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path, dry_run=DRY_RUN_TEMPLATE)
    copy = CopyBatchSparkOperator(task_id="copy_batch", spec_path=spec_path,
                                  conn_id=spec.copy_settings.spark_connection_id,
                                  execution_timeout=timedelta(seconds=spec.timeouts.copy_seconds))
    report = CopyReportOperator(task_id="copy_report", spec_path=spec_path)
    plan >> copy >> report
    plan >> report  # so an empty batch (copy skipped) still reports
    return plan, copy, report
