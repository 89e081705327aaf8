"""Configuration errors through a real task run (dag.test): one try, the whole message, no 30 s retry waits.

The DAG keeps its default retries (2, 30 s apart): only a failure a retry cannot heal may skip them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from dag_test_speed import QUICK_POLL

from kafka_ferry.dag_factory import write_stubs

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

RUN = QUICK_POLL + textwrap.dedent("""
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    run = bag.get_dag(sys.argv[2]).test(run_conf=json.loads(sys.argv[3]) if len(sys.argv) > 3 else None)
    tasks = {ti.task_id: {"state": str(ti.state), "try_number": ti.try_number,
                          "seconds": (ti.end_date - ti.start_date).total_seconds() if ti.end_date else None}
             for ti in run.get_task_instances()}
    print("RESULT " + json.dumps({"state": str(run.state), "tasks": tasks}))
""")


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory) -> tuple[Path, dict]:
    home = tmp_path_factory.mktemp("airflow")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], env=env, check=True,
                   capture_output=True, timeout=300)
    return home, env


def run_migration_dag(airflow_home, tmp_path, spec: dict, extra_env: dict | None = None,
                      conf: dict | None = None) -> tuple[dict, str]:
    home, env = airflow_home
    dags = tmp_path / "dags"
    (dags / "migrations").mkdir(parents=True)
    (dags / "migrations" / f"{spec['name']}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    write_stubs(dags)
    env = {**env, "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "KFERRY_WORK_DIR": str(tmp_path / "work"),
           **(extra_env or {})}
    args = [str(dags), f"kafka_ferry__{spec['name']}"] + ([json.dumps(conf)] if conf is not None else [])
    done = subprocess.run([sys.executable, "-c", RUN, *args], env=env, capture_output=True, text=True, timeout=600)
    log = done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, log[-5000:]
    return json.loads(lines[0][7:]), log


def timings(task: dict, log: str) -> str:
    """Figures for the report (never asserted): the task instance's duration and its runner's start to failure."""
    stamps = {}
    for line in log.splitlines():
        for event in ("Task started", "Task failed with exception"):
            if event in line and event not in stamps:
                stamps[event] = datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00"))
    runner = (stamps["Task failed with exception"] - stamps["Task started"]).total_seconds()
    return f"task instance {task['seconds']:.2f} s, task runner start to failure {runner:.2f} s"


def spec_doc(name: str, source: str, destination: str, spark: str, topics: str | None = None) -> dict:
    return {"name": name, "tenant": "test",
            "source": {"connection_id": source, "alias": "src"},
            "destination": {"connection_id": destination, "alias": "dst"},
            "topics": {"include": [topics or f"{name}\\..*"]},
            "copy": {"spark_connection_id": spark}}


def test_missing_and_mistyped_connections_fail_preflight_in_one_try_naming_all(airflow_home, tmp_path, clusters):
    name = clusters.unique("noconn")
    spec = spec_doc(name, "kf_missing_source", "kf_missing_destination", "kf_http_not_spark")

    result, log = run_migration_dag(airflow_home, tmp_path, spec, {
        "AIRFLOW_CONN_KF_HTTP_NOT_SPARK": json.dumps({"conn_type": "http", "host": "example.invalid"})})

    preflight = result["tasks"]["preflight"]
    assert result["state"] == "failed", log[-4000:]
    assert (preflight["state"], preflight["try_number"]) == ("failed", 1)
    assert result["tasks"]["provision_topics"]["state"] == "upstream_failed"
    path = tmp_path / "dags" / "migrations" / f"{name}.yaml"
    assert "\n".join([
        f"{path}: 3 problems in this migration spec",
        f"{path}:4: field 'source.connection_id' = 'kf_missing_source': no Airflow connection with this id",
        f"{path}:7: field 'destination.connection_id' = 'kf_missing_destination': no Airflow connection with this id",
        f"{path}:13: field 'copy.spark_connection_id' = 'kf_http_not_spark': the connection is of type 'http'; "
        "this field needs a connection of type 'spark' or 'spark_connect'",
    ]) in log
    print(f"\nfail-fast preflight (missing connections): 1 try; {timings(preflight, log)}")


def test_a_refused_provisioning_fails_preflight_in_one_try(airflow_home, tmp_path, clusters):
    name = clusters.unique("refused")
    clusters.create_topic("source", f"{name}.t", 2)
    clusters.create_topic("destination", f"{name}.t", 4)
    spec = spec_doc(name, clusters.SOURCE_CONN, clusters.DESTINATION_CONN, clusters.SPARK_CONN)

    result, log = run_migration_dag(airflow_home, tmp_path, spec)

    preflight = result["tasks"]["preflight"]
    assert (result["state"], preflight["state"], preflight["try_number"]) == ("failed", "failed", 1), log[-4000:]
    assert (f"AirflowFailException: provisioning refused, nothing was changed:\n  - {name}.t: destination has 4 "
            f"partitions, source {name}.t has 2; partition-preserving copy is impossible (shrink is not possible in "
            "Kafka: delete or rename the destination topic)\n") in log
    print(f"\nfail-fast preflight (provisioning refused): 1 try; {timings(preflight, log)}")


@pytest.mark.parametrize(("conf", "problem"), [
    ({"mode": "promote"}, "promote needs the migration name {name!r} typed into 'confirm_migration' to confirm the "
                          "cutover; it is empty"),
    ({"mode": "promote", "confirm_migration": "other-migration"},
     "promote needs the migration name {name!r} typed into 'confirm_migration' to confirm the cutover; "
     "got 'other-migration'"),
    ({"dry_run": True}, "unknown trigger field 'dry_run' (use mode='dry-run'); the form's fields are: "
                        "allow_rewind, confirm_migration, groups, mode, topics, waive_groups"),
], ids=["promote-unconfirmed", "promote-wrong-name", "unknown-field"])
def test_a_bad_trigger_fails_preflight_in_one_try_and_changes_nothing(airflow_home, tmp_path, clusters, conf,
                                                                       problem):
    name = clusters.unique("form")
    clusters.create_topic("source", f"{name}.t", 2)
    spec = spec_doc(name, clusters.SOURCE_CONN, clusters.DESTINATION_CONN, clusters.SPARK_CONN)

    result, log = run_migration_dag(airflow_home, tmp_path, spec, conf=conf)

    preflight = result["tasks"]["preflight"]
    assert (result["state"], preflight["state"], preflight["try_number"]) == ("failed", "failed", 1), log[-4000:]
    assert result["tasks"]["provision_topics"]["state"] == "upstream_failed"
    assert f"AirflowFailException: run of migration {name!r} refused: {problem.format(name=name)}" in log, "\n".join(
        line for line in log.splitlines() if "xception" in line or "refused" in line)[-4000:]
    # nothing changed: no mirror topic, no state topic on the destination
    assert clusters.cluster("destination").describe_topics([f"{name}.t", f"kafka-ferry.{name}.state"]) == {}


def port_nothing_listens_on() -> int:
    """A local port that refuses connections: bound by the OS for a moment, then released."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_bootstrap_fails_preflight_in_one_try_with_a_few_lines(airflow_home, tmp_path, clusters):
    name = clusters.unique("nobroker")
    address = f"127.0.0.1:{port_nothing_listens_on()}"
    spec = spec_doc(name, "kf_dead_source", clusters.DESTINATION_CONN, clusters.SPARK_CONN)

    result, log = run_migration_dag(airflow_home, tmp_path, spec, {"AIRFLOW_CONN_KF_DEAD_SOURCE": json.dumps(
        {"conn_type": "kafka", "extra": {"bootstrap.servers": address, "sasl.password": "hunter2-secret"}})})

    preflight = result["tasks"]["preflight"]
    assert (result["state"], preflight["state"], preflight["try_number"]) == ("failed", "failed", 1), log[-4000:]
    assert result["tasks"]["provision_topics"]["state"] == "upstream_failed"
    assert (f"AirflowFailException: Kafka connection 'kf_dead_source' (bootstrap servers {address}): no bootstrap "
            f"address accepts a connection ({address}: Connection refused): check the host and port of "
            "bootstrap.servers in the connection's Extra, and that the brokers are up and reachable from this "
            "worker; nothing was changed") in log, log[-4000:]
    assert "hunter2" not in log
    # the useful line is not buried: librdkafka's reconnect lines were ~2,000 of 2,277 lines of such a run
    mentions = [line for line in log.splitlines() if address in line or "rdkafka" in line]
    assert len(mentions) <= 4, "\n".join(mentions[:20])
    print(f"\nfail-fast preflight (unreachable bootstrap): 1 try, {len(mentions)} log lines name the address or "
          f"librdkafka, {len(log.splitlines())} lines in all; {timings(preflight, log)}")
