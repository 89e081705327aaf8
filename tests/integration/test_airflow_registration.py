"""The package as Airflow sees it after `pip install`: a provider with the `schemaregistry` connection type, and the
plugin registered once, so Airflow's home page shows no "Plugin Import Error".

Airflow's own commands and API server, on SQLite in a fresh AIRFLOW_HOME with the default (empty) plugins folder,
as a user's first `airflow standalone` would have it. The API server listens on KFERRY_REGISTRATION_API_PORT
(default 28480) and is stopped by its process group, even when the test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.airflow]

PORT = int(os.environ.get("KFERRY_REGISTRATION_API_PORT", "28480"))
AIRFLOW = str(Path(sys.executable).parent / "airflow")


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow_home")
    (home / "passwords.json").write_text(json.dumps({"admin": "s3cret"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW__"))}
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
                "AIRFLOW__API__PORT": str(PORT), "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__CORE__AUTH_MANAGER":
                    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False"})
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=600)
    return env


def test_connections_add_takes_the_registry_type_without_a_warning(airflow_env):
    added = subprocess.run([AIRFLOW, "connections", "add", "acme_registry", "--conn-type", "schemaregistry",
                            "--conn-host", "http://127.0.0.1:18181/apis/ccompat/v7"],
                           env=airflow_env, capture_output=True, text=True, timeout=300)
    said = added.stdout + added.stderr
    assert added.returncode == 0, said
    assert "invalid" not in said and "generic" not in said and "RFC3986" not in said, said
    shown = subprocess.run([AIRFLOW, "connections", "get", "acme_registry", "-o", "json"], env=airflow_env,
                           capture_output=True, text=True, timeout=300)
    assert json.loads(shown.stdout)[0]["conn_type"] == "schemaregistry", shown.stdout + shown.stderr


def _call(path: str, token: str | None = None, body: dict | None = None):
    request = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", method="POST" if body else "GET",
                                     data=json.dumps(body).encode() if body else None)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read().decode())


@contextlib.contextmanager
def api_server(env: dict[str, str], log: Path):
    with open(log, "ab") as out:
        proc = subprocess.Popen([AIRFLOW, "api-server", "--port", str(PORT)], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        while True:  # no time limit of its own: pytest's timeout ends a server that never answers
            if proc.poll() is not None:
                raise RuntimeError(f"airflow api-server exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(OSError, ValueError):
                if _call("/api/v2/monitor/health"):
                    break
            time.sleep(2)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_the_api_server_shows_no_plugin_import_error_and_the_registry_form(airflow_env, tmp_path):
    with api_server(airflow_env, tmp_path / "api-server.log"):
        token = _call("/auth/token", body={"username": "admin", "password": "s3cret"})["access_token"]
        errors = _call("/api/v2/plugins/importErrors", token)
        plugins = _call("/api/v2/plugins", token)
        hooks = _call("/ui/connections/hook_meta", token)

    assert errors["total_entries"] == 0, errors  # what the home page's red "Plugin Import Error" counts
    assert [p["name"] for p in plugins["plugins"]].count("kafka_ferry") == 1, plugins
    registry = [h for h in hooks if h["connection_type"] == "schemaregistry"]
    assert len(registry) == 1, [h["connection_type"] for h in hooks]
    assert registry[0]["hook_name"] == "Schema Registry (kafka-ferry)"
    assert registry[0]["standard_fields"]["host"]["title"] == "Registry URL", registry[0]
    extra = registry[0]["extra_fields"]
    assert set(extra) >= {"bearer_token", "ca_path", "timeout_s"}, extra
    assert extra["bearer_token"]["schema"]["format"] == "password", extra
