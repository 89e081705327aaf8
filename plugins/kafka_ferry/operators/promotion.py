"""Promotion steps as a task: runs the given ``PromotionRunner`` steps, resuming those already done.

Why several tasks share one runner: the DAG puts sensors between steps (lag 0 after the final copy,
group offsets synced after the commit), and each task's retry resumes from the state topic, not XCom.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from kafka_ferry.airflow_native.announce import TopicLineage, announce_promotion, promotion_measured
from kafka_ferry.copy.packaging import build_package_zip
from kafka_ferry.core.common.flags import parse_bool
from kafka_ferry.core.cutover.authority import DONE
from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.specs.trigger_form import PROMOTE
from kafka_ferry.operators.base import ActStart, MigrationOperator
from kafka_ferry.operators.copy import SPARK_CONNECT_CONN_TYPE
from kafka_ferry.operators.evidence import write_evidence
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.promotion.evidence import promotion_files
from kafka_ferry.promotion.steps import PROMOTION_TABLE, STEPS, FinalCopy, PromotionRunner, spark_connect_final_copy
from kafka_ferry.reports.publish import publish_promotion_run
from kafka_ferry.state.batches import batch_history
from kafka_ferry.storage.workdir import local_dir


class PromoteMigrationOperator(TopicLineage, MigrationOperator):
    """Runs promotion ``steps`` (subset of STEPS, in order); returns the report without per-row detail.

    Reports OpenLineage for the migration's topics and each step's duration as a metric; the task that runs
    ``mark_promoted`` adds one "promoted" asset event per mirror topic (extra: migration, cutover offsets) through
    its ``outlets`` (the migration's promoted asset alias).

    :param steps: the promotion steps to run, a subset of ``STEPS``, run in ``STEPS`` order; an unknown step is
        refused when the DAG is parsed.
    :param allow_rewind: let the final offset commit move a destination group's offset backwards (a bool or a
        template, read at run time).
    :param work_dir: where the promotion writes its report and offset map; default: the migration's work dir.
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``.
    """

    template_fields = (*MigrationOperator.template_fields, "allow_rewind")
    ui_color = "#f8d8d8"
    step_tables: ClassVar[tuple[str, ...]] = (PROMOTION_TABLE.kind,)  # its ``steps`` of it (tests/unit/airflow)

    def __init__(self, *, steps: tuple[str, ...] | list[str] = STEPS, allow_rewind: bool | str = False,
                 work_dir: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.steps = PROMOTION_TABLE.check(steps)  # an unknown step is refused here, when the DAG is parsed
        self.allow_rewind = allow_rewind
        self.work_dir = work_dir

    @fail_fast
    def execute(self, context: Any) -> dict:
        with self.acting(context, PROMOTE) as start:  # who did it: after the last refusal, before the first change
            return self._promote(context, start)

    def _promote(self, context: Any, start: ActStart) -> dict:
        runner = PromotionRunner(self.spec, self.source_cluster, self.destination_cluster, self.state_store,
                                 work_dir=self.work_dir, allow_rewind=parse_bool(self.allow_rewind),
                                 final_copy=self._final_copy_engine())
        # the cutover first (to the mark, fences lifted), then the way back for the report: the plan is for
        # people signing the cutover off; the consumers need not wait for it
        report = runner.add_rollback_plan(runner.run(self.steps, before_change=start, rollback_plan=False))
        self.log.info("promotion report: %s", report["report_path"])
        promotion_measured(self.spec.name, report)
        mark = "mark_promoted" in self.steps and report.get("status") == "promoted"
        events = announce_promotion(context, self, self.spec, self.state_store,
                                    self.source_cluster.bootstrap_servers, self.destination_cluster.bootstrap_servers,
                                    select_topics(self.spec, self.source_cluster.list_topic_names()),
                                    str(context.get("run_id") or "promotion"), mark)
        for uri in events:
            self.log.info("asset event %s: promoted", uri)
        act = self.record_act(context, PROMOTE, DONE) if mark else start.record
        evidence = None
        if mark:
            # the evidence of the cutover, once it is done: a retry of this task writes it again, whole
            evidence = write_evidence(self, context, PROMOTE, report, act, promotion_files, runner.work_dir)
        page = publish_promotion_run(self.spec, runner.work_dir, context.get("run_id") or "promotion",
                                     {**report, "act": act, **({"evidence": evidence} if evidence else {})},
                                     batch_history(self.state_store))
        self.log.info("run report: %s", page)
        return {k: v for k, v in report.items() if k not in ("groups", "reconciliation")}

    def _final_copy_engine(self) -> FinalCopy | None:
        """The catch-up batches' engine when it is a Spark Connect server; otherwise None (in this task)."""
        if "final_copy" not in self.steps:
            return None
        conn_id = self.spec.copy_settings.spark_connection_id
        try:
            connection = BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            return None  # a spark-submit-only deployment may have no such connection on this worker
        if connection.conn_type != SPARK_CONNECT_CONN_TYPE:
            return None
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        package = build_package_zip(local_dir(self.spec.name) / "packages")  # handed to Spark: a local file
        self.log.info("final copy on Spark Connect (connection '%s')", conn_id)
        return spark_connect_final_copy(SparkConnectHook(conn_id).get_connection_url(), package)
