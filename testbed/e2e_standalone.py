"""End-to-end: a real `airflow standalone` (scheduler, API server, triggerer, LocalExecutor on SQLite)
runs a migration DAG triggered over the REST API with Params, as the trigger form in the UI would.

    python testbed/e2e_standalone.py [--dag kafka_ferry__demo-tenant] [--conf '{"dry_run": true}']

Needs the test bed up and the demo tenant seeded (`make demo` does both). Prints each task's state and
exits non-zero unless the run succeeds. Not part of `make test` (it takes minutes on two cores).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "testbed"))
import demo  # noqa: E402  (connections and the seeded tenant)

PORT = int(os.environ.get("KFERRY_E2E_PORT", "28080"))
BASE = f"http://127.0.0.1:{PORT}"


def call(method: str, path: str, token: str | None = None, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    return json.loads(text) if text else {}


def wait(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except (OSError, ValueError):
            pass  # not up yet, or an HTML page from a server still starting
        time.sleep(2)
    raise TimeoutError(f"{what}: not within {timeout_s:g} s")


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup in `finally` on SIGTERM too
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dag", default="kafka_ferry__demo-tenant")
    parser.add_argument("--conf", default='{"dry_run": false}')
    args = parser.parse_args()
    demo.seed_source()
    home = REPO / ".testbed" / "airflow_e2e"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **demo.ENV, "AIRFLOW_HOME": str(home),
           "AIRFLOW__API__PORT": str(PORT), "AIRFLOW__API__HOST": "127.0.0.1",
           "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{BASE}/execution/",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
           "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "5",
           "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
           # standalone starts its components as `airflow …` from PATH: the venv's
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    log = open(home / "standalone.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "airflow", "standalone"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait(lambda: call("GET", "/api/v2/monitor/health"), 300, "API server up")
        token = call("GET", "/auth/token")["access_token"]  # all-admins mode: no credentials
        dag_path = "/api/v2/dags/" + urllib.parse.quote(args.dag)
        wait(lambda: call("GET", dag_path, token), 300, f"{args.dag} parsed")
        call("PATCH", dag_path, token, {"is_paused": False})
        run = call("POST", dag_path + "/dagRuns", token, {"logical_date": None, "conf": json.loads(args.conf)})
        run_path = f"{dag_path}/dagRuns/{urllib.parse.quote(run['dag_run_id'], safe='')}"
        started = time.monotonic()
        final = wait(lambda: (r := call("GET", run_path, token))["state"] in ("success", "failed") and r, 900,
                     "run finished")
        tasks = call("GET", run_path + "/taskInstances", token)["task_instances"]
        for ti in sorted(tasks, key=lambda t: t.get("start_date") or ""):
            print(f"  {ti['task_id']:<28} {ti['state']}")
        print(f"run {final['dag_run_id']}: {final['state']} in {time.monotonic() - started:.0f} s")
        return 0 if final["state"] == "success" else 1
    finally:
        stop_tree(proc)


def stop_tree(proc: subprocess.Popen) -> None:
    """Stop standalone and everything it started (its components are not all in its process group)."""
    import psutil

    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.terminate()
    _, alive = psutil.wait_procs(family, timeout=30)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


if __name__ == "__main__":
    sys.exit(main())
