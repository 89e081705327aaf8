"""A production-like Airflow for end-to-end runs: PostgreSQL plus api-server, scheduler, dag-processor and
triggerer (LocalExecutor), each started here and stopped by its process group, even on failure.

PostgreSQL comes from Debian's `postgresql` package (its binaries under /usr/lib/postgresql/<v>/bin), with
its data in a temporary directory and its socket there too; nothing is installed as a service. Users log in
through Airflow's simple auth manager (users from env, passwords from a file this module writes).

    with AirflowStack(home, dags_folder, extra_env) as stack:
        token = stack.token()
        ...
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

HOST = "127.0.0.1"
PG_PORT = int(os.environ.get("KFERRY_E2E_PG_PORT", "25532"))
API_PORT = int(os.environ.get("KFERRY_E2E_API_PORT", "28280"))
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
USER, PASSWORD = "tenant-admin", "kferry-e2e-pw"
FAB_AUTH_MANAGER = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
# Debian's Chromium as the browser tests start it (no background networking: this machine's network is closed)
CHROMIUM = os.environ.get("KFERRY_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def postgres_bin() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not versions:
        raise RuntimeError("PostgreSQL is not installed: apt-get install -y postgresql (Debian's package)")
    return versions[-1].parent


class AirflowStack:
    """PostgreSQL + the four Airflow services on loopback; a context manager that always stops what it started."""

    def __init__(self, home: Path, dags_folder: Path, extra_env: dict[str, str] | None = None,
                 auth: str = "simple") -> None:
        self.home, self.dags_folder = Path(home), Path(dags_folder)
        # Its own temp dir, not under home: the server runs as `postgres`, who may not enter the caller's dirs
        self.pg_data = Path(tempfile.mkdtemp(prefix="kferry-pg-")) / "data"
        self.procs: dict[str, subprocess.Popen] = {}
        self.base_url = f"http://{HOST}:{API_PORT}"
        self.env = {**os.environ, **(extra_env or {}),
                    "AIRFLOW_HOME": str(self.home),
                    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN":
                        f"postgresql+psycopg2://airflow@{HOST}:{PG_PORT}/airflow",
                    "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                    "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
                    "AIRFLOW__API__HOST": HOST, "AIRFLOW__API__PORT": str(API_PORT),
                    "AIRFLOW__API__BASE_URL": self.base_url,
                    "AIRFLOW__CORE__AUTH_MANAGER":
                        "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
                    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
                    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
                    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
                    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                    "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "5",
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
        self.auth = auth
        if auth == "fab":  # the FAB provider's auth manager: users and roles in the metadata DB, per-DAG permissions
            for key in [k for k in self.env if k.startswith("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER")]:
                del self.env[key]
            self.env["AIRFLOW__CORE__AUTH_MANAGER"] = FAB_AUTH_MANAGER

    # --- lifecycle -----------------------------------------------------------------------------------
    def __enter__(self) -> AirflowStack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "passwords.json").write_text(json.dumps({USER: PASSWORD}))
        self._start_postgres()
        self._airflow("db", "migrate")
        if self.auth == "fab":
            self.add_user(USER, PASSWORD, "Admin")
        for service in SERVICES:
            self._spawn(service, [sys.executable, "-m", "airflow", service])
        self.wait(lambda: self._alive() and self._get("/api/v2/monitor/health"), 300, "the API server answers")

    def _alive(self) -> bool:
        """Every service still runs (a port taken by another process ends the api-server at once)."""
        dead = {name: p.returncode for name, p in self.procs.items() if p.poll() is not None}
        if dead:
            raise RuntimeError(f"Airflow services exited: {dead}; logs in {self.home}:\n{self.logs()}")
        return True

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            _stop_group(self.procs.pop(name))
        pid_file = self.pg_data / "postmaster.pid"
        if pid_file.exists():
            subprocess.run([*_as_postgres(), str(postgres_bin() / "pg_ctl"), "-D", str(self.pg_data), "-m", "fast",
                            "-w", "stop"], capture_output=True, timeout=60, env=self._pg_env())
        shutil.rmtree(self.pg_data.parent, ignore_errors=True)

    # --- PostgreSQL ----------------------------------------------------------------------------------
    def _pg_env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith("PG")}

    def _start_postgres(self) -> None:
        pg = postgres_bin()
        as_user = _as_postgres()
        self.pg_data.mkdir(parents=True)
        if as_user:
            shutil.chown(self.pg_data.parent, "postgres")
            shutil.chown(self.pg_data, "postgres")
        subprocess.run([*as_user, str(pg / "initdb"), "-D", str(self.pg_data), "-U", "airflow", "--auth=trust"],
                       check=True, capture_output=True, timeout=120, env=self._pg_env())
        subprocess.run([*as_user, str(pg / "pg_ctl"), "-D", str(self.pg_data), "-l", str(self.pg_data / "log"),
                        "-o", f"-p {PG_PORT} -k {self.pg_data} -h {HOST}", "-w", "start"],
                       check=True, capture_output=True, timeout=120, env=self._pg_env())
        subprocess.run([str(pg / "createdb"), "-h", HOST, "-p", str(PG_PORT), "-U", "airflow", "airflow"],
                       check=True, capture_output=True, timeout=60, env=self._pg_env())

    # --- Airflow -------------------------------------------------------------------------------------
    def _airflow(self, *args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "airflow", *args], env=self.env, capture_output=True,
                              text=True, timeout=600)
        if done.returncode:
            raise RuntimeError(f"airflow {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")

    def airflow(self, *args: str, stdin: str | None = None) -> str:
        """An ``airflow`` CLI command against this stack's database; its output (raises naming it on failure)."""
        # a session of its own: no controlling terminal, so a password prompt reads stdin, never a person's tty
        done = subprocess.run([sys.executable, "-m", "airflow", *args], env=self.env, capture_output=True,
                              text=True, timeout=600, input=stdin, start_new_session=True)
        if done.returncode:
            raise RuntimeError(f"airflow {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done.stdout

    def add_user(self, name: str, password: str, role: str) -> None:
        """A FAB user with one role; the password goes on stdin (twice: the CLI asks again), never on argv."""
        self.airflow("users", "create", "--username", name, "--role", role, "--firstname", name, "--lastname", "e2e",
                     "--email", f"{name}@example.invalid", stdin=f"{password}\n{password}\n")

    def _spawn(self, name: str, cmd: list[str]) -> None:
        with open(self.home / f"{name}.log", "ab") as log:  # the child keeps its own copy of the descriptor
            self.procs[name] = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, start_new_session=True)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(
            self.home.glob("*.log")))

    # --- REST ----------------------------------------------------------------------------------------
    def token(self, user: str = USER, password: str = PASSWORD) -> str:
        return self.call("POST", "/auth/token", body={"username": user, "password": password})["access_token"]

    def call(self, method: str, path: str, token: str | None = None, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
        return json.loads(text) if text else {}

    def _get(self, path: str) -> dict:
        return self.call("GET", path)

    def runs(self, token: str, dag_id: str) -> list[dict]:
        """The DAG's runs, oldest first."""
        return self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns?order_by=start_date", token)["dag_runs"]

    def finished(self, token: str, dag_id: str, run_id: str) -> dict | None:
        """The run once it succeeded or failed; None while it runs."""
        run = self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}", token)
        return run if run["state"] in ("success", "failed") else None

    def task_states(self, token: str, dag_id: str, run_id: str) -> dict[str, str]:
        """task id -> state of one run."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances"
        return {t["task_id"]: t["state"] for t in self.call("GET", path, token)["task_instances"]}

    @staticmethod
    def wait(predicate, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, KeyError):
                value = predicate()
                if value:
                    return value
            time.sleep(2)
        raise TimeoutError(f"{what}: not within {timeout_s:g} s")


def _as_postgres() -> list[str]:
    """initdb and pg_ctl refuse to run as root: as root, run them as the `postgres` user Debian's package creates."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _stop_group(proc: subprocess.Popen, timeout_s: float = 30) -> None:
    """TERM the process group the service leads, KILL it if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # children that outlived their leader
