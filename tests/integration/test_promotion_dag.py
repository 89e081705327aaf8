"""A promote run of the DAG pieces through Airflow itself (dag.test: deferrable sensors' triggers run inline)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from dag_test_speed import QUICK_POLL
from scenarios import consume_as_group, one_group_migration

from kafka_ferry.promotion.guard import MigrationPromotedError, assert_not_promoted
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

RUN = QUICK_POLL + textwrap.dedent("""
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    run = bag.get_dag("kf_promo_test").test(run_conf={"mode": sys.argv[2]})
    print("RESULT " + json.dumps({"state": str(run.state)}))
""")


def run_promote(clusters, tmp_path, prefix: str, connections_in_db: bool = False):
    """Provision a one-group migration, then run the test DAG's promote mode under dag.test in a fresh AIRFLOW_HOME.

    ``connections_in_db``: the Kafka connections are added with ``airflow connections add`` to the metadata DB
    (SQLite) and removed from the environment, as a user following the docs has them."""
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, prefix, 2, 15, {0: 4, 1: 11})
    home, dags = tmp_path / "airflow", tmp_path / "airflow" / "dags"
    dags.mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "airflow_dags" / "kf_promotion_test_dag.py", dags)
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "KF_SPEC": spec_path, "KFERRY_WORK_DIR": str(tmp_path / "work")}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    if connections_in_db:
        for conn_id, bootstrap in ((clusters.SOURCE_CONN, clusters.source_bootstrap),
                                   (clusters.DESTINATION_CONN, clusters.destination_bootstrap)):
            env.pop(f"AIRFLOW_CONN_{conn_id.upper()}", None)
            subprocess.run([airflow, "connections", "add", conn_id, "--conn-type", "kafka", "--conn-extra",
                            json.dumps({"bootstrap.servers": bootstrap})], env=env, check=True, capture_output=True,
                           timeout=300)

    done = subprocess.run([sys.executable, "-c", RUN, str(dags), "promote"], env=env, capture_output=True,
                          text=True, timeout=600)
    return p, topic, spec, done


def assert_promoted(clusters, tmp_path, p, topic, spec, done) -> None:
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert result and json.loads(result[0][7:])["state"] == "success", (done.stdout + done.stderr)[-4000:]
    log = done.stdout + done.stderr
    assert "source_quiesced: ready: " in log  # it deferred: its trigger's event completed it (2 s window)
    store = MigrationStateStore(clusters.cluster("destination"), spec.state_topic_name)
    with pytest.raises(MigrationPromotedError):
        assert_not_promoted(store)
    assert consume_as_group(clusters, f"{p}-g", topic, 2) == {0: list(range(4, 15)), 1: list(range(11, 15))}
    report = json.loads((tmp_path / "work" / spec.name / "promotion-report.json").read_text())
    assert report["status"] == "promoted" and report["reconciliation"]["ok"]


def test_promote_mode_runs_sensors_and_steps_to_promoted(clusters, tmp_path):
    assert_promoted(clusters, tmp_path, *run_promote(clusters, tmp_path, "dagp"))


def test_promote_with_connections_in_the_metadata_db(clusters, tmp_path):
    """The deferrable sensors' triggers run inline under dag.test and must see connections stored in the DB."""
    p, topic, spec, done = run_promote(clusters, tmp_path, "dagdb", connections_in_db=True)
    assert "isn't defined" not in done.stdout + done.stderr
    assert_promoted(clusters, tmp_path, p, topic, spec, done)
