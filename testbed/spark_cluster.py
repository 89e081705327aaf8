"""A Spark standalone cluster on loopback: one master and N workers, started with pyspark's `spark-class`.

Why: the copy job must run on a real cluster, where executors are separate JVMs that import kafka_ferry
from the zip spark-submit ships, not from the Airflow host's install. Workers run Python tasks with
the interpreter in PYSPARK_PYTHON (default: the one running this script). Standard library only.

    python testbed/spark_cluster.py up [--workers 2]   # start, wait until every worker registered
    python testbed/spark_cluster.py down
    python testbed/spark_cluster.py status
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from kafka_testbed import alive as _alive
from kafka_testbed import stop_recorded

REPO_DIR = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("KFERRY_TESTBED_RUN_DIR", REPO_DIR / ".testbed")) / "spark"
HOST = "127.0.0.1"
MASTER_PORT = int(os.environ.get("KFERRY_SPARK_MASTER_PORT", "7077"))
MASTER_UI_PORT = int(os.environ.get("KFERRY_SPARK_MASTER_UI_PORT", "18080"))
MASTER_URL = f"spark://{HOST}:{MASTER_PORT}"


def _env() -> dict[str, str]:
    """The servers' environment. They run from the install's compiled mirror (kafka_ferry.copy.spark_home), as
    the docs advise a platform to: their Python workers import pyspark's bytecode, not its zipped sources."""
    from kafka_ferry.copy.spark_home import compiled_spark_home, spark_home

    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    install = spark_home(os.environ)
    home = compiled_spark_home(install, RUN_DIR / "home") or install
    return {**os.environ, "PYSPARK_PYTHON": python, "SPARK_LOCAL_IP": HOST, "SPARK_LOG_DIR": str(RUN_DIR / "logs"),
            "SPARK_HOME": str(home)}


def _start(name: str, args: list[str], launcher: str = "spark-class") -> int:
    (RUN_DIR / "logs").mkdir(parents=True, exist_ok=True)
    with open(RUN_DIR / "logs" / f"{name}.log", "ab") as out:
        proc = subprocess.Popen([str(Path(sys.executable).parent / launcher), *args], stdout=out,
                                stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=_env(), start_new_session=True)
    (RUN_DIR / f"{name}.pid").write_text(str(proc.pid))
    return proc.pid


def master_state() -> dict | None:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{MASTER_UI_PORT}/json/", timeout=2) as response:
            return json.load(response)
    except OSError:
        return None


def alive_workers() -> int:
    state = master_state()
    return sum(1 for w in (state or {}).get("workers", []) if w.get("state") == "ALIVE")


def up(workers: int = 2, cores: int = 1, memory: str = "1g", timeout_s: float = 90.0) -> str:
    """Start the master and workers (unless running) and wait until all workers registered."""
    if master_state() is None:
        _start("master", ["org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(MASTER_PORT),
                          "--webui-port", str(MASTER_UI_PORT)])
    for i in range(workers):
        pid_file = RUN_DIR / f"worker-{i}.pid"
        if pid_file.exists() and _alive(int(pid_file.read_text())):
            continue
        work = RUN_DIR / f"worker-{i}"
        work.mkdir(parents=True, exist_ok=True)
        _start(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", MASTER_URL, "--host", HOST,
                               "--cores", str(cores), "--memory", memory, "--webui-port", str(18081 + i),
                               "--work-dir", str(work)])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if alive_workers() >= workers:
            return MASTER_URL
        time.sleep(0.5)
    raise RuntimeError(f"{workers} Spark workers not registered after {timeout_s:.0f} s; see {RUN_DIR / 'logs'}")


def down() -> None:
    """Stop the processes this script started (by their recorded process group), workers first."""
    for pid_file in sorted(RUN_DIR.glob("worker-*.pid")) + [RUN_DIR / "master.pid"]:
        stop_recorded(pid_file, 20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if args.action == "up":
        print(up(args.workers))
    elif args.action == "down":
        down()
    else:
        print(f"master {MASTER_URL}: {'up' if master_state() else 'down'}, {alive_workers()} workers alive")
    return 0


if __name__ == "__main__":
    sys.exit(main())
