"""Helpers of the route matrix (test_route_matrix.py): a real migration DAG run through ``dag.test(run_conf=...)`` in an
Airflow home of its own, several runs per process (one Airflow start per state, not per cell)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dag_test_speed import PARSE_ONCE, QUICK_POLL

# argv: dags folder. Reads one [dag id, run conf] per line on stdin and runs it with dag.test; each run is framed by
# markers, so its log (the task logs dag.test prints) is told apart from the next run's, and the result line carries
# every task's state and try number. The parent reads both clusters between two runs (one Airflow start per session).
RUN = PARSE_ONCE + QUICK_POLL + textwrap.dedent("""
    import json, sys, traceback
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    print("@@READY", flush=True)
    for line in sys.stdin:
        dag_id, conf = json.loads(line)
        print("@@RUN-BEGIN", flush=True)
        try:
            run = bag.get_dag(dag_id).test(run_conf=conf)
            tasks = {ti.task_id: [str(ti.state).rsplit(".", 1)[-1].lower(), ti.try_number]
                     for ti in run.get_task_instances()}
            result = {"state": str(run.state).rsplit(".", 1)[-1].lower(), "tasks": tasks}
        except BaseException:
            result = {"state": "dag.test raised: " + traceback.format_exc()[-3000:], "tasks": {}}
        print("\\n@@RESULT " + json.dumps(result), flush=True)
""")


@dataclass
class RunResult:
    conf: dict
    state: str
    tasks: dict[str, tuple[str, int]]
    log: str
    returns: dict | None = None  # task id -> its return value, for a session script that prints "returns"

    def failed_tasks(self) -> dict[str, int]:
        """The failed tasks and their try numbers."""
        return {t: n for t, (s, n) in self.tasks.items() if s == "failed"}

    def errors(self) -> str:
        """The lines naming an exception (fail_fast raises AirflowFailException with the cause's message)."""
        return "\n".join(line for line in self.log.splitlines()
                         if "Exception:" in line or "Error:" in line or "Refused:" in line)

    def tail(self, chars: int = 6000) -> str:
        return f"conf {self.conf}: {self.state} {self.tasks}\n{self.errors()[-4000:]}\n{self.log[-chars:]}"


class DagSession:
    """One child process running the migration's DAG run after run (``DagRunner.session``); stopped by pid."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._until("@@READY", 600)

    def _read(self) -> None:
        for line in self.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _until(self, marker: str, timeout_s: float) -> list[str]:
        got: list[str] = []
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=max(1.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {marker} from the DAG process in {timeout_s} s:\n"
                                     + "".join(got)[-8000:]) from None
            if line is None:
                raise AssertionError(f"the DAG process ended before {marker}:\n" + "".join(got)[-8000:])
            got.append(line)
            if line.startswith(marker):
                return got

    def run(self, dag_id: str, conf: dict, timeout_s: float = 1800) -> RunResult:
        self.stdin.write(json.dumps([dag_id, conf]) + "\n")
        self.stdin.flush()
        lines = self._until("@@RESULT ", timeout_s)
        result = json.loads(lines[-1][len("@@RESULT "):])
        return RunResult(conf, result["state"], {t: tuple(v) for t, v in result["tasks"].items()}, "".join(lines),
                         result.get("returns"))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        self.stdout.close()  # the reader thread has seen its end: the process is gone


class DagRunner:
    """The migrations' own DAGs (``dag_factory`` stubs over their specs) in a fresh Airflow home (SQLite)."""

    def __init__(self, home: Path, spec_paths: list[str], env: dict[str, str]) -> None:
        from kafka_ferry.dag_factory import write_stubs

        self.dags = home / "dags"
        (self.dags / "migrations").mkdir(parents=True)
        for spec_path in spec_paths:
            Path(self.dags / "migrations" / Path(spec_path).name).write_text(Path(spec_path).read_text())
        write_stubs(self.dags)
        self.env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
                    "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PYTHONUNBUFFERED": "1", **env}
        self.env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
        subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], env=self.env, check=True,
                       capture_output=True, timeout=600)

    def session(self, env: dict[str, str] | None = None) -> DagSession:
        """A child process that runs confs one by one (``DagSession.run``); ``env`` on top of the runner's."""
        return DagSession([sys.executable, "-c", RUN, str(self.dags)], {**self.env, **(env or {})})
