"""`airflow standalone` in the background for one AIRFLOW_HOME, and a stop that leaves none of its processes.

Why a script: `airflow standalone` starts a scheduler, an API server, a triggerer, a DAG processor and their
workers as its children; a TERM to the one process leaves them running (and holding the ports). This starts it as
the leader of a process group of its own, records its pid in ``$AIRFLOW_HOME/standalone.pid`` and its output in
``$AIRFLOW_HOME/standalone.log``, and waits until the API server answers. `down` TERMs the whole group (and any
descendant that left it), waits, and KILLs what is left.

    export AIRFLOW_HOME=$PWD/airflow AIRFLOW__API__PORT=28080 ...   # the ports: docs/testbed.md
    python testbed/airflow_standalone.py up      # prints the UI's address and where the admin password is
    python testbed/airflow_standalone.py status
    python testbed/airflow_standalone.py down
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

PASSWORDS_FILE = "simple_auth_manager_passwords.json.generated"


def home() -> Path:
    value = os.environ.get("AIRFLOW_HOME")
    if not value:
        raise SystemExit("AIRFLOW_HOME is not set: export the Airflow home this standalone serves (its metadata DB, "
                         "connections and DAGs folder), e.g. export AIRFLOW_HOME=$PWD/airflow")
    return Path(value)


def port() -> int:
    return int(os.environ.get("AIRFLOW__API__PORT", "8080"))


def pid_file() -> Path:
    return home() / "standalone.pid"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def recorded_pid() -> int | None:
    try:
        pid = int(pid_file().read_text())
    except (FileNotFoundError, ValueError):
        return None
    return pid if alive(pid) else None


def answers(timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port()}/api/v2/monitor/health", timeout=timeout_s) as resp:
            return resp.status == 200
    except OSError:
        return False


def up(timeout_s: float = 300.0) -> int:
    if recorded_pid():
        print(f"airflow standalone: already running (pid {recorded_pid()}), http://localhost:{port()}")
        return 0
    if answers():
        raise SystemExit(f"port {port()} answers already: another Airflow? Move this one (AIRFLOW__API__PORT and "
                         "the ports docs/testbed.md names)")
    home().mkdir(parents=True, exist_ok=True)
    log = home() / "standalone.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "airflow", "standalone"], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    pid_file().write_text(str(proc.pid))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"airflow standalone exited ({proc.returncode}); see {log}")
        if answers():
            print(f"airflow standalone: pid {proc.pid}, UI and API on http://localhost:{port()}; the admin's "
                  f"password is in {home() / PASSWORDS_FILE}; log {log}; stop it with "
                  f"`python testbed/airflow_standalone.py down`", flush=True)
            return 0
        time.sleep(1)
    stop()
    raise SystemExit(f"airflow standalone did not answer on port {port()} in {timeout_s:.0f} s; see {log}")


def stop(timeout_s: float = 30.0) -> bool:
    """TERM the group (and descendants that left it), KILL what is left after ``timeout_s``. False: none ran."""
    import psutil

    pid = recorded_pid()
    if pid is None:
        pid_file().unlink(missing_ok=True)
        return False
    members = {p for p in psutil.process_iter() if _pgid(p) == pid}
    try:
        members |= set(psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        pass
    os.killpg(pid, signal.SIGTERM)
    for p in members:
        _signal(p, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (alive(pid) or any(_running(p) for p in members)):
        time.sleep(0.2)
    for p in members:
        _signal(p, signal.SIGKILL)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    pid_file().unlink(missing_ok=True)
    return True


def _pgid(p) -> int | None:
    try:
        return os.getpgid(p.pid)
    except (ProcessLookupError, PermissionError):
        return None


def _running(p) -> bool:
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _signal(p, signum: int) -> None:
    import psutil

    try:
        if _running(p):
            p.send_signal(signum)
    except psutil.NoSuchProcess:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "status"])
    args = parser.parse_args(argv)
    if args.action == "up":
        return up()
    if args.action == "down":
        print(f"airflow standalone: {'stopped' if stop() else 'not running'}")
        return 0
    pid = recorded_pid()
    print(f"airflow standalone ({home()}): " + (f"running pid {pid}, http://localhost:{port()}" if pid
                                                 else "stopped"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
