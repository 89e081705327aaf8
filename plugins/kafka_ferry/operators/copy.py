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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_ferry.copy.batch import finish_batch, report_path_for
from kafka_ferry.copy.clients import CLUSTER_CONFIGS_ENV, encode_cluster_configs
from kafka_ferry.copy.packaging import build_package_zip
from kafka_ferry.copy.plan import CopyPlan, work_dir
from kafka_ferry.copy.planner import plan_copy, record_accepted_gaps
from kafka_ferry.copy.report import report_lines
from kafka_ferry.core.batch_planning import RetentionGapError
from kafka_ferry.core.spec import load_spec
from kafka_ferry.hooks.kafka_cluster import KafkaClusterHook
from kafka_ferry.operators.base import MigrationOperator
from kafka_ferry.promotion.guard import MigrationPromotedError, assert_not_promoted

APPLICATION_ENV = "KFERRY_COPY_APPLICATION"
# Where spark-submit runs from the repository (editable install); a packaged deployment sets the env var.
DEFAULT_APPLICATION = Path(__file__).resolve().parents[3] / "spark_jobs" / "copy_batch.py"
# Masters where spark-submit would put env_vars on its command line (visible in `ps` and logs).
ENV_ON_COMMAND_LINE = ("yarn", "k8s://")


def _truthy(value: Any) -> bool:
    return value in (True, "True", "true", "1")


class PlanCopyBatchOperator(MigrationOperator):
    """Plans the next batch from the stored offsets, writes it to the work dir and returns its summary.

    Fails without retry when source retention deleted uncopied records, naming every lost range, unless
    the spec accepts gaps: then they go to the gap ledger first. ``dry_run`` plans without recording.
    """

    template_fields = (*MigrationOperator.template_fields, "dry_run")

    def __init__(self, *, dry_run: bool | str = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.dry_run = dry_run

    def execute(self, context: Any) -> dict:
        try:
            assert_not_promoted(self.state_store)
        except MigrationPromotedError as exc:
            raise AirflowFailException(str(exc)) from exc
        try:
            plan = plan_copy(self.spec, self.source_hook, self.destination_hook, self.state_store)
        except RetentionGapError as exc:
            raise AirflowFailException(str(exc)) from exc  # a retry cannot bring deleted records back
        dry_run = _truthy(self.dry_run)
        if plan.gaps and not dry_run:
            record_accepted_gaps(plan, self.state_store, self.spec.topics.rename.destination_topic)
        path = plan.write(work_dir(self.spec.name))
        summary = {**plan.summary(), "dry_run": dry_run, "plan_path": str(path),
                   "report_path": str(report_path_for(path, plan))}
        self.log.info("batch %s: %d partitions, up to %d offsets%s; plan %s", plan.batch_id, summary["partitions"],
                      summary["offsets"], " (dry run: nothing will be copied)" if dry_run else "", path)
        for task in plan.tasks:
            self.log.info("  %s-%s [%d, %d) -> %s", task.source_topic, task.partition, task.start_offset,
                          task.end_offset, task.destination_topic)
        return summary


class CopyBatchSparkOperator(SparkSubmitOperator):
    """spark-submit of ``spark_jobs/copy_batch.py`` for the plan the planning task made; skipped when empty.

    Both clusters' client configs reach the job only through the ``KFERRY_CLUSTER_CONFIGS`` environment
    variable of the spark-submit process, set here at run time (not a template field, so never rendered
    into the metadata DB, never on the command line, never in XCom). The package goes to executors as a
    zip built from the code this worker runs.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "spec_path")
    ui_color = "#f8e0c8"

    def __init__(self, *, spec_path: str, plan_task_id: str = "plan_copy", application: str | None = None,
                 **kwargs) -> None:
        kwargs.setdefault("name", "kafka-ferry-copy")
        super().__init__(application=application or "", **kwargs)
        self.spec_path = spec_path
        self.plan_task_id = plan_task_id

    def execute(self, context: Any) -> None:
        summary = context["ti"].xcom_pull(task_ids=self.plan_task_id)
        if not summary or summary.get("empty") or summary.get("dry_run"):
            reason = "dry run" if summary and summary.get("dry_run") else "nothing to copy"
            raise AirflowSkipException(f"{reason}: batch {summary.get('batch_id') if summary else '?'}")
        spec = load_spec(self.spec_path)
        master = self._master()
        self.application = self.application or _application()
        self.application_args = ["--plan", summary["plan_path"], "--report", summary["report_path"]]
        package = build_package_zip(work_dir(spec.name) / "packages")
        self.py_files = ",".join(filter(None, [str(package), self.py_files]))
        self.name = f"kafka-ferry {spec.name} {summary['batch_id']}"
        secret = encode_cluster_configs(KafkaClusterHook(spec.source.connection_id).client_config,
                                        KafkaClusterHook(spec.destination.connection_id).client_config)
        public_env = self.env_vars
        env = dict(public_env or {})
        if master.startswith("local") and "PYSPARK_PYTHON" not in env and "PYSPARK_PYTHON" not in os.environ:
            env["PYSPARK_PYTHON"] = sys.executable  # local executors: this worker's Python has confluent-kafka
        self.env_vars = {**env, CLUSTER_CONFIGS_ENV: secret}
        _put_spark_submit_on_path()
        Path(summary["report_path"]).unlink(missing_ok=True)  # the report task must never read a stale one
        try:
            super().execute(context)
        finally:
            self.env_vars = public_env
            self._hook = None  # the hook holds the env; do not keep it past the run

    def _master(self) -> str:
        """The connection's master; refused where spark-submit would put env vars on its command line."""
        master = (BaseHook.get_connection(self._conn_id).host or "").strip()
        if master.startswith(ENV_ON_COMMAND_LINE):
            raise AirflowFailException(
                f"Spark connection '{self._conn_id}' uses master {master!r}: spark-submit would put the cluster "
                "credentials on its command line there; use a local[*] or spark:// (client mode) connection")
        return master


def _put_spark_submit_on_path() -> None:
    """SparkSubmitHook runs `spark-submit` from PATH; in an unactivated venv that is pyspark's, next to Python."""
    if shutil.which("spark-submit") is None:
        bin_dir = str(Path(sys.executable).parent)
        os.environ["PATH"] = os.pathsep.join(filter(None, [bin_dir, os.environ.get("PATH")]))


def _application() -> str:
    return os.environ.get(APPLICATION_ENV) or str(DEFAULT_APPLICATION)


class CopyReportOperator(MigrationOperator):
    """Logs and returns the batch report (records, bytes, lag before/after, syncs, gaps, duration).

    Runs also when the copy was skipped (nothing to copy): the report then says so, with the lag.
    """

    def __init__(self, *, plan_task_id: str = "plan_copy", **kwargs) -> None:
        # After plan_copy and copy_batch: reports a skipped (empty) copy, is skipped when the branch skips both.
        kwargs.setdefault("trigger_rule", "none_failed_min_one_success")
        super().__init__(**kwargs)
        self.plan_task_id = plan_task_id

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
            configs = {"source": self.source_hook.client_config, "destination": self.destination_hook.client_config}
            report = finish_batch(plan, [], configs, plan.planned_at_ms, report_path)
        elif report_path.exists():
            report = json.loads(report_path.read_text())
        else:
            raise AirflowFailException(f"the copy job wrote no report at {report_path}")
        for line in report_lines(report):
            self.log.info("%s", line)
        return {k: v for k, v in report.items() if k not in ("partitions", "lag_before", "lag_after")}


def copy_batch_tasks(spec, spec_path: str) -> tuple[PlanCopyBatchOperator, CopyBatchSparkOperator,
                                                      CopyReportOperator]:
    """The catch-up copy of a migration DAG: ``plan_copy >> copy_batch >> copy_report`` (call inside a DAG)."""
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path, dry_run="{{ params.dry_run }}")
    copy = CopyBatchSparkOperator(task_id="copy_batch", spec_path=spec_path,
                                  conn_id=spec.copy_settings.spark_connection_id)
    report = CopyReportOperator(task_id="copy_report", spec_path=spec_path)
    plan >> copy >> report
    plan >> report  # so an empty batch (copy skipped) still reports
    return plan, copy, report
