"""The work dir in object storage: a real S3-compatible server (SeaweedFS, testbed/object_store.py), never a mock.

Catch-up runs and a promotion of a real migration DAG (dag.test, spark-submit local[2]) write their plans, reports,
offset maps and pages to the bucket and read them back from there; the API server renders the report tab and the
Migrations page from the bucket with no shared volume; credentials come only from the Airflow connection.
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
from scenarios import commit_source_group, provision, run_batch, seed_plain, write_spec

from kafka_ferry.dag_factory import write_stubs
from kafka_ferry.reports.publish import run_file_name

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark, pytest.mark.long]

RUN = QUICK_POLL + textwrap.dedent("""
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    run = bag.get_dag(sys.argv[2]).test(run_conf=json.loads(sys.argv[3]))
    with create_session() as session:
        xcoms = [str(x.value) for x in session.query(XComModel).filter(XComModel.run_id == run.run_id)]
    print("RESULT " + json.dumps({"state": str(run.state), "run_id": run.run_id, "xcoms": xcoms,
                                  "tasks": {ti.task_id: str(ti.state) for ti in run.get_task_instances()}}))
""")

# The API server's side: Airflow's real app, a logged-in user, the plugin's two pages.
PROBE = textwrap.dedent("""
    import json, sys
    from fastapi.testclient import TestClient
    from airflow.api_fastapi.app import create_app

    client = TestClient(create_app())
    token = client.post("/auth/token", json={"username": "viewer", "password": "s3cret"}).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    run = client.get(f"/kafka-ferry/runs/{sys.argv[1]}/{sys.argv[2]}", headers=auth)
    overview = client.get("/kafka-ferry/", headers=auth)
    print("RESULT " + json.dumps({"run": [run.status_code, run.text],
                                  "overview": [overview.status_code, overview.text]}))
""")


def _run(env: dict, *args: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", *args], env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, (done.stdout + done.stderr)[-5000:]
    return json.loads(lines[0][7:]), done.stdout + done.stderr


def test_the_work_dir_on_s3_goes_through_the_connection_only(s3_work_dir, object_store, monkeypatch):
    import s3fs

    from kafka_ferry.storage.workdir import WorkDirError, as_path, read_text, work_base, work_dir, write_text

    env, fs, root = s3_work_dir
    page = write_text(work_dir("orders") / "runs" / "r.html", "<p>batch</p>")

    assert fs.cat(f"{root}/work/orders/runs/r.html") == b"<p>batch</p>"
    # the text that goes to XCom names the connection, never its secret, and leads back to the object
    assert str(page) == f"s3://{env['KFERRY_WORK_DIR_CONN_ID']}@{root}/work/orders/runs/r.html"
    assert read_text(as_path(str(page))) == "<p>batch</p>"
    # the server enforces credentials: without the connection's there is no reading the work dir
    anonymous = s3fs.S3FileSystem(anon=True, endpoint_url=object_store.ENDPOINT, skip_instance_cache=True)
    with pytest.raises(PermissionError):
        anonymous.cat(f"{root}/work/orders/runs/r.html")
    # credentials in the URL are refused, and not echoed
    monkeypatch.setenv("KFERRY_WORK_DIR", f"s3://{object_store.ACCESS_KEY}:{object_store.SECRET_KEY}@{root}/w")
    with pytest.raises(WorkDirError, match="never in the URL") as refused:
        work_base()
    assert object_store.SECRET_KEY not in str(refused.value)


def test_catch_up_and_promotion_keep_the_work_dir_on_s3_and_the_ui_renders_it(clusters, tmp_path, s3_work_dir,
                                                                              object_store):
    s3_env, fs, root = s3_work_dir
    p = clusters.unique("s3wd")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, 30)
    commit_source_group(clusters, f"{p}-g", {(topic, 0): 10, (topic, 1): 25})
    home, dags = tmp_path / "airflow", tmp_path / "airflow" / "dags"
    (dags / "migrations").mkdir(parents=True)
    (dags / "migrations" / f"{p}.yaml").write_text(yaml.safe_dump({
        "name": p, "tenant": "test",
        "source": {"connection_id": clusters.SOURCE_CONN, "alias": "src"},
        "destination": {"connection_id": clusters.DESTINATION_CONN, "alias": f"dst-{p}"},
        "topics": {"include": [f"{p}\\..*"]}, "groups": {"include": [f"{p}-.*"]},
        "copy": {"spark_connection_id": clusters.SPARK_CONN},
        "promotion": {"quiesce_window_seconds": 2, "poke_interval_seconds": 1}}))
    write_stubs(dags)
    env = {**os.environ, **s3_env, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "KFERRY_LOCAL_DIR": str(tmp_path / "local")}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    dag_id, prefix = f"kafka_ferry__{p}", f"{root}/work/{p}"

    first, first_log = _run(env, RUN, str(dags), dag_id, "{}")

    assert first["state"] == "success", first_log[-5000:]
    assert first["tasks"]["copy_batch"] == "success"
    names = {path.removeprefix(prefix + "/") for path in fs.find(prefix)}
    plans = sorted(n for n in names if n.startswith("plan-"))
    assert len(plans) == 1 and plans[0].replace("plan-", "report-") in names, names
    assert {"overview.json", "offset-map/offset-map.json", "offset-map/offset-map.csv",
            f"runs/{run_file_name(first['run_id'])}.html"} <= names, names
    report = json.loads(fs.cat(f"{prefix}/{plans[0].replace('plan-', 'report-')}"))
    assert report["records_copied"] == 60
    offset_map = json.loads(fs.cat(f"{prefix}/offset-map/offset-map.json"))
    assert {(q["source_topic"], q["partition"]) for q in offset_map["partitions"]} == {(topic, 0), (topic, 1)}
    # nothing of the work dir on this host: the default local work dir was never made, only the local staging
    assert not (home / "kafka-ferry").exists()
    assert not list((tmp_path / "local").rglob("*.json"))  # the staged plan and report went back to the store

    seed_plain(clusters, topic, 2, 5, start=30)
    second, second_log = _run(env, RUN, str(dags), dag_id, "{}")

    assert second["state"] == "success", second_log[-5000:]
    (second_report,) = {n.removeprefix(prefix + "/") for n in fs.find(prefix)
                        if n.endswith(".json") and "/report-" in n} - {plans[0].replace("plan-", "report-")}
    report2 = json.loads(fs.cat(f"{prefix}/{second_report}"))
    assert report2["records_copied"] == 10  # the copy job read the second plan from the store, wrote its report there
    overview = json.loads(fs.cat(f"{prefix}/overview.json"))
    assert (overview["dag_id"], overview["last_run_id"], overview["lag"]) == (dag_id, second["run_id"], 0)

    promoted, promoted_log = _run(env, RUN, str(dags), dag_id,
                                  json.dumps({"mode": "promote", "confirm_migration": p}))

    assert promoted["state"] == "success", promoted_log[-5000:]
    promotion = json.loads(fs.cat(f"{prefix}/promotion-report.json"))
    assert promotion["status"] == "promoted" and promotion["reconciliation"]["ok"]
    overview = json.loads(fs.cat(f"{prefix}/overview.json"))
    # the promotion read the row the catch-up runs wrote and kept it (last batch), marking it promoted
    assert overview["promoted"] is True and overview["last_run_id"] == promoted["run_id"]
    assert overview["last_batch"] == report2["batch_id"]
    for text in (first_log, second_log, promoted_log, *first["xcoms"], *second["xcoms"], *promoted["xcoms"]):
        assert object_store.SECRET_KEY not in text

    # the API server: the same settings and connection, no volume shared with the "workers" above
    ui_home = tmp_path / "api-server"
    (ui_home / "plugins").mkdir(parents=True)
    (ui_home / "passwords.json").write_text(json.dumps({"viewer": "s3cret"}))
    ui_env = {**os.environ, **s3_env, "AIRFLOW_HOME": str(ui_home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
              "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__PLUGINS_FOLDER": str(ui_home / "plugins"),
              "AIRFLOW__CORE__AUTH_MANAGER":
                  "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
              "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "viewer:admin",
              "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(ui_home / "passwords.json"),
              "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}"}
    ui_env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    ui_env.pop("KFERRY_LOCAL_DIR", None)
    pages, ui_log = _run(ui_env, PROBE, dag_id, first["run_id"])

    assert pages["run"][0] == 200, ui_log[-3000:]
    assert "<b>60</b>records copied" in pages["run"][1]
    assert pages["overview"][0] == 200 and p in pages["overview"][1] and "no migration has reported" not in \
        pages["overview"][1]
    assert not (ui_home / "kafka-ferry").exists()


def test_a_batch_on_spark_connect_reads_its_plan_from_s3_and_writes_its_report_there(
        clusters, tmp_path, s3_work_dir, spark_connect, monkeypatch):
    s3_env, fs, root = s3_work_dir
    monkeypatch.setenv("KFERRY_LOCAL_DIR", str(tmp_path / "local"))
    p = clusters.unique("s3sc")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, 20)
    spec_path = write_spec(tmp_path, clusters, p, copy={"spark_connection_id": spark_connect})
    provision(spec_path)

    report = run_batch(spec_path, spark_connect)  # this task is the Connect client: it reads and writes the store

    assert report["records_copied"] == 40 and report["lag_after_total"] == 0
    names = {n.rsplit("/", 1)[-1] for n in fs.find(f"{root}/work/{p.lower()}")}
    assert f"report-{report['batch_id']}.json" in names and f"plan-{report['batch_id']}.json" in names, names
    # what Spark is handed stays local: the package zip (and the kept session's record beside it)
    assert list((tmp_path / "local").rglob("*.zip")) and not any(n.endswith(".zip") for n in names)
