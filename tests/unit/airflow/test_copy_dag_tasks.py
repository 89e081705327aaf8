"""The copy tasks in every migration DAG, and the Spark task's guards, without a broker or a Spark run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture()
def dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    return bag.dags["kafka_ferry__demo-tenant"]


def test_groups_then_branch_then_plan_copy_then_spark_then_report(dag):
    assert dag.get_task("provision_groups").downstream_task_ids == {"choose_mode"}
    assert "plan_copy" in dag.get_task("choose_mode").downstream_task_ids
    assert dag.get_task("plan_copy").downstream_task_ids == {"copy_batch", "copy_report"}
    assert "copy_report" in dag.get_task("copy_batch").downstream_task_ids
    report = dag.get_task("copy_report")
    # runs (after plan_copy) and reports lag when the copy was skipped; skipped with both in a promote run
    assert report.trigger_rule == "none_failed_min_one_success"
    # the demo tenant has schemas: its batch's records are decoded on the destination before translation
    assert dag.get_task("copy_report").downstream_task_ids == {"decode_check"}
    assert dag.get_task("translate_offsets").upstream_task_ids == {"decode_check"}


def test_spark_task_uses_the_specs_connection_and_holds_no_secret_at_parse_time(dag, monkeypatch, tmp_path):
    from kafka_ferry.operators import copy as copy_module

    copy = dag.get_task("copy_batch")
    assert copy._conn_id == "spark_local"  # copy.spark_connection_id of demo-tenant.yaml
    assert not copy.env_vars
    # no path is baked in at parse time; execute resolves it to the shipped copy job
    assert copy.application == ""
    monkeypatch.delenv(copy_module.APPLICATION_ENV, raising=False)
    application = Path(copy_module._application(tmp_path))
    assert application.parent == tmp_path and application.is_file()
    # the launcher runs the packaged job from anywhere: no repository path in it
    job = subprocess.run([sys.executable, str(application), "--help"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert job.returncode == 0 and "--plan" in job.stdout, job.stderr[-2000:]
    monkeypatch.setenv(copy_module.APPLICATION_ENV, "/opt/custom/job.py")
    assert copy_module._application(tmp_path) == "/opt/custom/job.py"  # an override still wins


class _TI:
    def __init__(self, value):
        self.value = value

    def xcom_pull(self, task_ids):
        return self.value


def test_an_empty_plan_skips_spark_without_starting_it():
    from airflow.sdk.exceptions import AirflowSkipException

    from kafka_ferry.operators.copy import CopyBatchSparkOperator

    op = CopyBatchSparkOperator(task_id="copy_batch", spec_path=str(REPO / "dags/migrations/demo-tenant.yaml"))
    with pytest.raises(AirflowSkipException, match="nothing to copy: batch batch-x"):
        op.execute({"ti": _TI({"empty": True, "batch_id": "batch-x"})})
    with pytest.raises(AirflowSkipException, match="dry run"):
        op.execute({"ti": _TI({"empty": False, "dry_run": True, "batch_id": "batch-y"})})
