"""Catch-up runs of a real migration DAG (dag.test): plan_copy -> copy_batch (spark-submit local[2]) -> copy_report.

Checks what only Airflow itself shows: the XCom hand-over, the skip of the Spark task when nothing is
left, the report running anyway, and that the connection's secret reaches no XCom, rendered field or log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from dag_test_speed import QUICK_POLL
from scenarios import assert_copied_exactly_once, seed_plain

from kafka_ferry.dag_factory import write_stubs

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark]

RUN = QUICK_POLL + textwrap.dedent("""
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    dag = bag.get_dag(sys.argv[2])
    run = dag.test(run_conf=json.loads(sys.argv[3]) if len(sys.argv) > 3 else None)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    with create_session() as session:
        xcoms = [str(x.value) for x in session.query(XComModel).filter(XComModel.run_id == run.run_id)]
        rendered = [json.dumps(r.rendered_fields, default=str) for r in session.query(RenderedTaskInstanceFields)
                    .filter(RenderedTaskInstanceFields.run_id == run.run_id)]
    print("RESULT " + json.dumps({"state": str(run.state), "tasks": states, "xcoms": xcoms, "rendered": rendered}))
""")


def run_dag(dags: Path, dag_id: str, env: dict) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", RUN, str(dags), dag_id], env=env, capture_output=True, text=True,
                          timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, (done.stdout + done.stderr)[-5000:]
    return json.loads(lines[0][7:]), done.stdout + done.stderr


def test_catch_up_runs_copy_then_skip_spark_when_nothing_is_new(clusters, tmp_path):
    secret = "s3cret-" + clusters.unique("pw")
    p = clusters.unique("dagc")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, 60)
    home, dags = tmp_path / "airflow", tmp_path / "airflow" / "dags"
    (dags / "migrations").mkdir(parents=True)
    (dags / "migrations" / f"{p}.yaml").write_text(yaml.safe_dump({
        "name": p, "tenant": "test",
        "source": {"connection_id": "kf_test_source_secret", "alias": "src"},
        "destination": {"connection_id": clusters.DESTINATION_CONN, "alias": f"dst-{p}"},
        "topics": {"include": [f"{p}\\..*"]}, "groups": {"include": [f"{p}-.*"], "allow_empty": True},
        "copy": {"spark_connection_id": clusters.SPARK_CONN}}))
    write_stubs(dags)
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "KFERRY_WORK_DIR": str(tmp_path / "work"),
           "AIRFLOW_CONN_KF_TEST_SOURCE_SECRET": json.dumps({"conn_type": "kafka", "extra": {
               "bootstrap.servers": clusters.source_bootstrap, "sasl.username": "ferry", "sasl.password": secret}})}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    # like a worker in an unactivated venv: spark-submit is not on PATH, the copy task must find it itself
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep) if d and d != venv_bin)
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], env=env, check=True,
                   capture_output=True, timeout=300)
    dag_id = f"kafka_ferry__{p}"

    first, first_log = run_dag(dags, dag_id, env)

    assert first["state"] == "success", first_log[-5000:]
    assert {first["tasks"][t] for t in ("plan_copy", "copy_batch", "copy_report")} == {"success"}
    source_id = clusters.cluster("source").describe_cluster().cluster_id
    assert sum(len(v) for v in assert_copied_exactly_once(clusters, topic, topic, 2, source_id).values()) == 120
    assert "records / " in first_log and "lag 120 -> 0 offsets" in first_log

    pages = sorted((tmp_path / "work" / p / "runs").glob("*.html"))
    assert len(pages) == 1, pages  # the run's report page, written by the catch-up translation
    page = pages[0].read_text()
    assert "<b>120</b>records copied" in page and "<b>120</b>lag before" in page and "<b>0</b>lag after" in page
    assert "<svg" in page and f"{topic}</td><td>0</td>" in page
    overview = json.loads((tmp_path / "work" / p / "overview.json").read_text())
    assert (overview["dag_id"], overview["lag"], overview["promoted"]) == (dag_id, 0, False)

    second, second_log = run_dag(dags, dag_id, env)

    assert second["tasks"]["copy_batch"] == "skipped" and second["tasks"]["copy_report"] == "success"
    assert "nothing to copy" in second_log and "0 records / 0 bytes copied" in second_log
    pages = [path.read_text() for path in (tmp_path / "work" / p / "runs").glob("*.html")]
    assert len(pages) == 2  # one page per run
    for text in (first_log, second_log, *first["xcoms"], *first["rendered"], *second["xcoms"], *pages):
        assert secret not in text
    assert any("batch_id" in x for x in first["xcoms"])  # the XComs and rendered fields were really read
    assert any('"dry_run_flag": "False"' in r for r in first["rendered"])
    assert not any(f"{p}.yaml" in r for r in first["rendered"])  # a file name is data: never a rendered field
