"""docs/first-migration.md, run as written: its fenced ``bash first-migration`` blocks, extracted from the doc.

Two walks from an empty directory to a promoted tenant: the common steps plus the blocks marked for one walk.

- ``airflow`` (plain Airflow) on the shared test bed, the doc's variables pointing at its clusters;
- ``own-ports``, ``registry``, ``command``, ``ui`` and ``stop``: what a user beside another team types. A Kafka
  pair and a schema-registry pair of its own on moved ports, Avro values through the registries, the kafka-ferry
  command, then ``airflow standalone`` with its API, execution-API and log-server ports moved, its UI and import
  errors read through the moved port, a run triggered as the form sends it, and the doc's own stop block, which
  must leave no process of the walk (a safety net then stops, by pid group, whatever a pid file still names).

The doc's port numbers are replaced by the test's (``KFERRY_DOC_PORT_BASE``, default 23100, the next 34 ports), so
two runs coexist; every number replaced must be in the doc, or the test fails. ``kafka-ferry`` is
``python -m kafka_ferry.cli`` here (the venv is not reinstalled), ``~/kafka-ferry`` (the user's clone) this checkout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from argparse import Namespace
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark, pytest.mark.long]

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "first-migration.md"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.M | re.S)
TOPICS = ("shop.orders", "shop.customers")
# what the doc's spec creates on the destination (its section 4 lists them), removed before and after each walk
INTERNAL = ("kafka-ferry.shop.state", "mm2-offset-syncs.shop-new.internal", "shop-old.checkpoints.internal",
            "shop-old.heartbeats")


def doc_script(*paths: str, common: bool = True) -> str:
    """The doc's common blocks (unless ``common`` is false) and those of the paths named, in doc order."""
    blocks = []
    for info, body in FENCE.findall(DOC.read_text()):
        words = info.split()
        if words[:2] == ["bash", "first-migration"] and ((len(words) == 2 and common) or words[2:3] in (
                [p] for p in paths)):
            blocks.append(body)
    return "\n".join(blocks)


def test_the_doc_marks_both_paths_and_lists_every_internal_topic():
    assert "kafka-ferry promote" in doc_script("command") and "airflow dags test" in doc_script("airflow")
    assert not [line for line in doc_script("airflow").splitlines() if line.startswith("kafka-ferry ")]
    for topic in INTERNAL:
        assert f"`{topic}`" in DOC.read_text()
    assert "airflow_standalone.py\" up" in doc_script("ui", common=False)
    assert "airflow_standalone.py\" down" in doc_script("stop", common=False)


def test_every_port_of_the_own_ports_walk_is_moved_by_the_test():
    """Each port the walk starts a server on is one the test replaces (a new one in the doc fails here); 19092 and
    29092 are the shared test bed's, the defaults of SOURCE_BOOTSTRAP/DESTINATION_BOOTSTRAP, which the walk sets."""
    script = doc_script("own-ports", "registry", "command", "ui", "stop", common=False)
    found = set(re.findall(r"PORT=(\d+)", script)) | set(re.findall(r":(\d{4,5})\b", script))
    assert found - {"19092", "29092"} == set(PORTS), sorted(found)


def wipe(clusters) -> None:
    """Remove what a walk made on the shared test bed (its topics, its group), and wait until they are gone."""
    for side, names in (("source", TOPICS), ("destination", TOPICS + INTERNAL)):
        admin = clusters.admin(side)
        present = [t for t in names if t in admin.list_topics(timeout=30).topics]
        for future in (admin.delete_topics(present, operation_timeout=30).values() if present else []):
            future.result(60)
        groups = [g.group_id for g in admin.list_consumer_groups(request_timeout=30).result(30).valid
                  if g.group_id == "shop-billing"]
        for future in (admin.delete_consumer_groups(groups, request_timeout=30).values() if groups else []):
            future.result(60)
        deadline = time.monotonic() + 60
        while set(names) & set(admin.list_topics(timeout=30).topics):
            assert time.monotonic() < deadline, f"{side}: topics of the walk not deleted in 60 s"
            time.sleep(0.5)


def shim_dir(tmp_path: Path) -> Path:
    """A ``kafka-ferry`` on PATH running this checkout's package (as the console script would)."""
    shim = tmp_path / "bin" / "kafka-ferry"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kafka_ferry.cli "$@"\n')
    shim.chmod(0o755)
    return shim.parent


def walk_env(tmp_path: Path) -> dict[str, str]:
    """The user's shell: no Airflow or kafka-ferry setting of the test session (ports, homes, run dirs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "KFERRY_WORK_DIR"))
           and not (k.startswith("KFERRY_") and (k.endswith(("_PORT", "_RUN_DIR")) or "_SR_" in k))}
    env["PATH"] = os.pathsep.join([str(shim_dir(tmp_path)), str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def test_the_first_migration_with_plain_airflow_runs_as_written_to_a_promoted_tenant(clusters, tmp_path):
    script = doc_script("airflow")
    env = {**walk_env(tmp_path), "SOURCE_BOOTSTRAP": clusters.source_bootstrap,
           "DESTINATION_BOOTSTRAP": clusters.destination_bootstrap}
    wipe(clusters)
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=1500)
        out = done.stdout + done.stderr
        assert done.returncode == 0, out[-6000:]

        home = tmp_path / "shop-migration"
        report = (home / "airflow" / "kafka-ferry" / "shop" / "promotion-report.json").read_text()
        assert '"status": "promoted"' in report
        assert "kafka_ferry__shop" in done.stdout
        # the group resumes on the destination where it stopped on the source (offsets are kept one to one)
        committed = clusters.cluster("destination").group_offsets("shop-billing")
        assert committed == {("shop.orders", p): 5 for p in range(6)}
        assert set(clusters.cluster("destination").describe_topics(TOPICS)) == set(TOPICS)
    finally:
        wipe(clusters)


# the doc's port -> the test's offset from KFERRY_DOC_PORT_BASE (a Kafka port's controller is + 1, SASL + 2)
PORTS = {"39092": 0, "49092": 10, "37081": 20, "37091": 21, "37082": 22, "37092": 23,
         "28080": 30, "28793": 31, "28794": 32, "28974": 33}


def moved(script: str, base: int) -> str:
    """The doc's commands with the test's ports and this checkout as the user's clone; every replaced value
    must be in the doc (a changed number there fails here, not silently on the default port)."""
    for doc_port, offset in PORTS.items():
        assert doc_port in script, f"port {doc_port} is no longer in docs/first-migration.md: update PORTS"
        script = re.sub(rf"\b{doc_port}\b", str(base + offset), script)
    assert "export KAFKA_FERRY=~/kafka-ferry" in script
    return script.replace("export KAFKA_FERRY=~/kafka-ferry", f"export KAFKA_FERRY={REPO}")


def api(port: int, path: str, token: str | None = None, body: dict | None = None, method: str | None = None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method or ("POST" if body else "GET"),
                                     data=json.dumps(body).encode() if body is not None else None)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=60) as response:
        raw = response.read().decode()
        return json.loads(raw) if raw.lstrip().startswith(("{", "[")) else raw


def wait_for(what: str, probe, timeout_s: float = 600.0):
    """``probe()`` until it returns something true (a missing DAG or a run in flight returns None); no timing is
    asserted, the timeout only ends a hung wait."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = probe()
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
            found = None
        except (TimeoutError, urllib.error.URLError):  # a busy API server (SQLite, one machine): ask again
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f} s"
        time.sleep(2)


def stop_the_walk(tmp_path: Path, env: dict[str, str], saved_env: Path) -> list[str]:
    """The doc's stop block in the walk's environment, then a safety net: every process group a pid file under
    the walk names (each server is its group's leader) gets a KILL. Returns what the stop block left running."""
    import psutil

    pid_files = [p for p in tmp_path.rglob("*.pid") if p.read_text().strip().isdigit()]
    groups = {int(p.read_text()) for p in pid_files}
    stop = doc_script("stop", common=False)
    if saved_env.exists():
        done = subprocess.run(["bash", "-c", f"source {saved_env} 2>/dev/null; set -e; {stop}"], env=env,
                              capture_output=True, text=True, timeout=300)
        print(done.stdout + done.stderr)
    left = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if os.getpgid(proc.pid) in groups and proc.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])[:120]}")
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            continue
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    return left


@pytest.mark.timeout(2400)  # two clusters, two registries, two Spark batches and airflow standalone, on a busy box
def test_the_command_path_on_own_ports_with_a_registry_pair_and_the_ui_runs_as_written(tmp_path):
    from kafka_ferry.cli import run_conf

    base = int(os.environ.get("KFERRY_DOC_PORT_BASE", "23100"))
    saved_env = tmp_path / "walk.env"
    script = moved(doc_script("own-ports", "registry", "command", "ui"), base)
    env = walk_env(tmp_path)
    api_port = base + PORTS["28080"]
    log = tmp_path / "walk.log"
    try:
        # the walk's output to a file as it goes: where a slow or hung step stopped shows in the failure
        with open(log, "w") as out_file:
            walk = subprocess.run(["bash", "-xeuo", "pipefail", "-c",
                                   f"trap 'export -p > {saved_env}' EXIT\n{script}"], cwd=tmp_path, env=env,
                                  stdout=out_file, stderr=subprocess.STDOUT, text=True, timeout=2000)
        out = log.read_text()
        done = Namespace(stdout=out)
        assert walk.returncode == 0, out[-8000:]
        # the kafka-ferry command, on the moved pair, with the registries
        assert f"cluster localhost:{base}" in out or f"localhost:{base}" in out, out[-3000:]
        assert "ok: connection 'shop_old_kafka'" in done.stdout and "3 source topic(s) selected" in done.stdout
        assert "ok: connection 'shop_old_registry' (schemaregistry" in done.stdout, done.stdout[:4000]
        assert "ok: connection 'shop_new_registry' (schemaregistry" in done.stdout
        assert "  promoted: no" in done.stdout
        assert re.search(r"  promoted: yes, at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", done.stdout), done.stdout[-3000:]
        assert "DAG run " in done.stdout and "promotion: promoted (" in done.stdout
        home = tmp_path / "shop-migration" / "airflow"
        report = (home / "kafka-ferry" / "shop" / "promotion-report.json").read_text()
        assert '"status": "promoted"' in report
        # the destination registry holds the payments' subject (remapped), and the values decode there
        dest_registry = f"http://127.0.0.1:{base + PORTS['37082']}/apis/ccompat/v7"
        assert "shop.payments-value" in api(base + PORTS["37082"], "/apis/ccompat/v7/subjects"), dest_registry

        # the UI on the moved port: the home page, no import error (plugins or DAGs), a run as the form sends it
        assert f"http://localhost:{api_port}" in done.stdout
        page = api(api_port, "/")
        assert "<html" in page.lower()
        password = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
        token = api(api_port, "/auth/token", body={"username": "admin", "password": password})["access_token"]
        assert api(api_port, "/api/v2/plugins/importErrors", token)["total_entries"] == 0
        dag_id = "kafka_ferry__shop"
        wait_for("the DAG in the standalone's API", lambda: api(api_port, f"/api/v2/dags/{dag_id}", token))
        assert api(api_port, "/api/v2/importErrors", token)["total_entries"] == 0
        api(api_port, f"/api/v2/dags/{dag_id}", token, body={"is_paused": False}, method="PATCH")
        conf = run_conf(Namespace(command="rollback-plan", groups=[], topics=[]), None)
        run = api(api_port, f"/api/v2/dags/{dag_id}/dagRuns", token, body={"logical_date": None, "conf": conf})
        run_path = f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}"
        state = wait_for("the triggered rollback-plan run", lambda: (
            lambda now: now if now in ("success", "failed") else None)(api(api_port, run_path, token)["state"]))
        tasks = {t["task_id"]: t["state"] for t in
                 api(api_port, f"{run_path}/taskInstances", token)["task_instances"]}
        assert state == "success", (tasks, (home / "standalone.log").read_text()[-4000:])
        assert tasks["rollback"] == "success" and tasks["preflight"] == "success", tasks
    finally:
        left = stop_the_walk(tmp_path, env, saved_env)
        if log.exists():
            print(log.read_text()[-6000:])  # shown with a failure (pytest prints a failed test's output)
    assert not left, f"the doc's stop block left these running: {left}"
