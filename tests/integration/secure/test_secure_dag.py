"""A migration DAG run by Airflow itself (dag.test), catch-up then promotion, over SASL_SSL as principals that
hold exactly the minimum ACLs; the passwords appear in no log, XCom, rendered field or process command line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_copy_dag_run import RUN
from test_least_privilege import ProcessListWatch, assert_migrated_exactly, grep_files, secure_migration

from kafka_ferry.dag_factory import write_stubs

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark]


def test_migration_dag_over_sasl_with_least_privilege(private, tmp_path):
    m = secure_migration(private, tmp_path, "sdag")
    secrets = [m["users"]["source"][1], m["users"]["destination"][1]]
    home, dags = tmp_path / "airflow", tmp_path / "airflow" / "dags"
    (dags / "migrations").mkdir(parents=True)
    shutil.copy(m["spec_path"], dags / "migrations" / Path(m["spec_path"]).name)
    write_stubs(dags)
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "KFERRY_WORK_DIR": str(tmp_path / "work")}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], env=env, check=True,
                   capture_output=True, timeout=300)
    results, logs = {}, ""
    with ProcessListWatch(secrets) as watch:
        for mode in ("catch-up", "promote"):
            conf = {"mode": mode, **({"confirm_migration": m["spec"].name} if mode == "promote" else {})}
            done = subprocess.run([sys.executable, "-c", RUN, str(dags), m["spec"].dag_id, json.dumps(conf)],
                                  env=env, capture_output=True, text=True, timeout=900)
            logs += done.stdout + done.stderr
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            assert lines, (done.stdout + done.stderr)[-5000:]
            results[mode] = json.loads(lines[0][7:])
            assert results[mode]["state"] == "success", (mode, results[mode]["tasks"], logs[-5000:])

    assert_migrated_exactly(private, m)
    public = logs + json.dumps(results)
    assert not any(s in public for s in secrets)  # task logs, XComs, rendered fields
    assert watch.samples > 10 and watch.hits == []
    checked, hits = grep_files([home, tmp_path / "work"], secrets)
    assert checked > 5 and hits == []
    print(f"secure DAG: catch-up {results['catch-up']['tasks']}; promote {results['promote']['tasks']}; "
          f"{checked} files and {watch.samples} process listings free of the secrets")
