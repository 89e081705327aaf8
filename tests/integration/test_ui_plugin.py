"""The UI plugin inside Airflow's real API server app: pages behind Airflow's login and DAG permissions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kafka_ferry.core.cutover.evidence import manifest_of

pytestmark = [pytest.mark.airflow]

PROBE = textwrap.dedent("""
    import json, sys
    from fastapi.testclient import TestClient
    from airflow.api_fastapi.app import create_app

    client = TestClient(create_app())
    out = {"anonymous_overview": client.get("/kafka-ferry/").status_code,
           "anonymous_run": client.get("/kafka-ferry/runs/kafka_ferry__orders/manual__1").status_code}
    token = client.post("/auth/token", json={"username": "viewer", "password": "s3cret"}).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    run = client.get("/kafka-ferry/runs/kafka_ferry__orders/manual__1", headers=auth)
    missing = client.get("/kafka-ferry/runs/kafka_ferry__orders/manual__2", headers=auth)
    overview = client.get("/kafka-ferry/", headers=auth)
    views = client.get("/api/v2/plugins", headers=auth)
    # a summarized table's rows, one click away, under the run page's own check (reports.render.Details)
    detail = client.get("/kafka-ferry/runs/kafka_ferry__orders/manual__1/partitions", headers=auth)
    out.update(detail=[detail.status_code, detail.text],
               anonymous_detail=client.get("/kafka-ferry/runs/kafka_ferry__orders/manual__1/partitions").status_code,
               odd_detail=client.get("/kafka-ferry/runs/kafka_ferry__orders/manual__1/..%2Fmanual__1",
                                     headers=auth).status_code)
    # the run's evidence bundle, verified as the page is asked for, under the same check
    evidence = client.get("/kafka-ferry/runs/kafka_ferry__orders/manual__1/evidence", headers=auth)
    out.update(evidence=[evidence.status_code, evidence.text],
               anonymous_evidence=client.get("/kafka-ferry/runs/kafka_ferry__orders/manual__1/evidence").status_code,
               no_evidence=client.get("/kafka-ferry/runs/kafka_ferry__orders/manual__2/evidence",
                                      headers=auth).status_code)
    out.update(run=[run.status_code, run.text], missing=[missing.status_code, missing.text],
               overview=[overview.status_code, overview.text], views=views.text)
    # the issue's two run ids: each its own page
    colon = client.get("/kafka-ferry/runs/kafka_ferry__orders/manual__2026-11-25T07:00:00%2B00:00", headers=auth)
    out.update(colon=[colon.status_code, colon.text],
               headers={name: {k.lower(): v for k, v in r.headers.items()}
                        for name, r in (("run", run), ("missing", missing), ("overview", overview))})
    out["headers"]["anonymous"] = {k.lower(): v for k, v in
                                   client.get("/kafka-ferry/runs/kafka_ferry__orders/manual__1").headers.items()}
    print("RESULT " + json.dumps(out))
""")


def test_reports_need_a_login_and_are_served_to_a_user_with_dag_access(tmp_path):
    home, work = tmp_path / "airflow", tmp_path / "work"
    (home / "plugins").mkdir(parents=True)
    # The package's `airflow.plugins` entry point registers the plugin (editable install too); a plugins-folder file
    # importing it as well would register it twice ("already registered": a red import error on every page).
    (home / "passwords.json").write_text(json.dumps({"viewer": "s3cret"}))
    runs = work / "orders" / "runs"
    runs.mkdir(parents=True)
    (runs / "manual__1.html").write_text("<html><body>batch report of orders</body></html>")
    (runs / "manual__1.partitions.html").write_text("<html><body>every partition of orders</body></html>")
    (runs / "manual__2026-11-25T07_00_00_00_00.html").write_text("<html><body>the underscore run</body></html>")
    (runs / "manual__2026-11-25T07~3A00~3A00~2B00~3A00.html").write_text("<html><body>the colon run</body></html>")
    bundle = work / "orders" / "evidence" / "promote-manual__1"  # an unsigned bundle (promotion.evidence's layout)
    bundle.mkdir(parents=True)
    files = {"act.json": b'{"user":"alice"}', "report.json": b'{"status":"promoted"}'}
    for name, data in files.items():
        (bundle / name).write_bytes(data)
    (bundle / "manifest.json").write_bytes(manifest_of("orders", "promote", "manual__1", 1, "0.1.0", files).encode())
    (work / "orders" / "overview.json").write_text(json.dumps(
        {"migration": "orders", "tenant": "acme", "dag_id": "kafka_ferry__orders", "last_run_id": "manual__1",
         "lag": 0, "promoted": False}))
    env = {**os.environ, "AIRFLOW_HOME": str(home), "KFERRY_WORK_DIR": str(work),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
           "AIRFLOW__CORE__AUTH_MANAGER":
               "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "viewer:viewer",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False"}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)

    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)

    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, (done.stdout + done.stderr)[-5000:]
    out = json.loads(lines[0][7:])
    assert out["anonymous_overview"] == out["anonymous_run"] == 401
    assert out["run"] == [200, "<html><body>batch report of orders</body></html>"]
    assert out["colon"] == [200, "<html><body>the colon run</body></html>"]
    assert out["detail"] == [200, "<html><body>every partition of orders</body></html>"]
    assert out["anonymous_detail"] == 401 and out["odd_detail"] == 404
    assert out["evidence"][0] == 200 and "promote-manual__1" in out["evidence"][1], out["evidence"]
    assert "signature: unsigned" in out["evidence"][1] and "&quot;act.json&quot;" in out["evidence"][1]
    assert ">verified<" in out["evidence"][1]
    assert out["anonymous_evidence"] == 401 and out["no_evidence"] == 404
    for name, headers in out["headers"].items():  # pages, 404s and the 401 alike
        csp = headers.get("content-security-policy", "")
        assert "default-src 'none'" in csp and "frame-ancestors 'self'" in csp and "script-src" not in csp, name
        assert headers.get("x-content-type-options") == "nosniff", name
    assert out["missing"][0] == 404 and "No kafka-ferry report for run <code>manual__2</code>" in out["missing"][1]
    # the viewer may read every DAG, but none is parsed here: the overview lists no DAG the user cannot see
    assert out["overview"][0] == 200 and "no migration has reported yet" in out["overview"][1]
    views = json.loads(out["views"])
    names = {v["name"]: v for p in views["plugins"] for v in p.get("external_views", [])}
    assert names["Migrations"]["destination"] == "nav"
    assert names["Migration report"]["href"] == "/kafka-ferry/runs/{DAG_ID}/{RUN_ID}"
    assert names["Migration report"]["destination"] == "dag_run"
