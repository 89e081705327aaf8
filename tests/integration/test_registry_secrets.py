"""Registry credentials through a real DAG run (dag.test): in no message, log, XCom, rendered field, page or file.

Issue #36 case 5: ``http://user:secret@host`` in a schema_registry connection reached every
``SchemaRegistryUnavailable`` (its message names the URL) and so every log line of it. The leak check of the
Kafka passwords (secure/test_secure_dag.py) covers the clusters; this one covers the registries: a URL with user
info is refused before any call, naming the connection and field, and login/password sent to a registry that
refuses them stay out of everything the run leaves behind - the task log, the metadata database (XComs, rendered
fields, task instance notes), the work dir (run pages, overview rows, reports) and Airflow's log folder.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_fail_fast_dag_run import airflow_home, run_migration_dag, spec_doc  # noqa: F401 - the fixture

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

SECRET = "hunter2-registry-pw"


@pytest.fixture
def refusing_registry():
    """A registry on loopback that answers 401 to everything (the client's credentials are wrong)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = b'{"error_code": 40101, "message": "unauthorized"}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_PUT = do_POST = do_GET  # noqa: N815

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def registry_spec(name: str, clusters) -> dict:
    spec = spec_doc(name, clusters.SOURCE_CONN, clusters.DESTINATION_CONN, clusters.SPARK_CONN)
    spec["schema_registry"] = {"source_connection_id": "kf_sr_source", "destination_connection_id": "kf_sr_dest",
                               "mode": "remap"}
    return spec


def grep_files(roots: list[Path], secret: str) -> tuple[list[Path], list[str]]:
    """(files read, those holding ``secret``) under ``roots``: the metadata DB, the logs, the work dir."""
    files = [p for root in roots for p in (root.rglob("*") if root.is_dir() else [root]) if p.is_file()]
    return files, [str(p) for p in files if secret.encode() in p.read_bytes()]


def assert_no_secret_left(airflow_home, tmp_path, log: str, result: dict) -> int:  # noqa: F811
    assert SECRET not in log and SECRET not in json.dumps(result)
    checked, hits = grep_files([airflow_home[0], tmp_path / "work"], SECRET)  # DB (XCom, rendered), logs, pages
    assert airflow_home[0] / "airflow.db" in checked  # the metadata DB: XComs, rendered fields, the run's conf
    assert hits == []
    return len(checked)


def test_a_registry_url_with_user_info_is_refused_and_the_secret_is_nowhere(airflow_home, tmp_path,  # noqa: F811
                                                                            clusters, refusing_registry):
    name = clusters.unique("srurl")
    clusters.create_topic("source", f"{name}.t", 1)
    userinfo_url = refusing_registry.replace("http://", f"http://svc:{SECRET}@")
    result, log = run_migration_dag(airflow_home, tmp_path, registry_spec(name, clusters), {
        "AIRFLOW_CONN_KF_SR_SOURCE": json.dumps({"conn_type": "schema_registry", "host": userinfo_url}),
        "AIRFLOW_CONN_KF_SR_DEST": json.dumps({"conn_type": "schema_registry", "host": refusing_registry})})

    failed = {task: t for task, t in result["tasks"].items() if t["state"] == "failed"}
    assert result["state"] == "failed" and failed, log[-4000:]
    assert all(t["try_number"] == 1 for t in failed.values()), failed  # permanent: no retry waits
    assert ("connection 'kf_sr_source': field 'host' is refused: the URL has a user part (user:password@); "
            "credentials go in 'login'/'password' (or Extra 'bearer_token'), never in the URL") in log, log[-4000:]
    checked = assert_no_secret_left(airflow_home, tmp_path, log, result)
    print(f"\nregistry URL with user info: refused by {sorted(failed)} in one try; {checked} files free of it")


def test_registry_login_and_password_refused_by_the_registry_are_nowhere(airflow_home, tmp_path,  # noqa: F811
                                                                         clusters, refusing_registry):
    name = clusters.unique("srpw")
    clusters.create_topic("source", f"{name}.t", 1)
    conn = {"conn_type": "schema_registry", "host": refusing_registry, "login": "svc", "password": SECRET}
    result, log = run_migration_dag(airflow_home, tmp_path, registry_spec(name, clusters), {
        "AIRFLOW_CONN_KF_SR_SOURCE": json.dumps(conn), "AIRFLOW_CONN_KF_SR_DEST": json.dumps(conn)})

    failed = {task: t for task, t in result["tasks"].items() if t["state"] == "failed"}
    assert result["state"] == "failed" and failed, log[-4000:]
    assert f"schema registry 'kf_sr_source' ({refusing_registry}): " in log, log[-4000:]
    assert "refused with HTTP 401: check the connection's credentials" in log
    checked = assert_no_secret_left(airflow_home, tmp_path, log, result)
    print(f"\nregistry refusing its credentials: {sorted(failed)} failed; {checked} files free of the password")
