"""Running a migration's real DAG (``dag_factory``) the way a user does: ``dag.test(run_conf=...)`` with the conf the
trigger form sends, or the ``kafka-ferry`` command, each in an Airflow home of the test's own (a subprocess: Airflow's
settings are read once per process)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from dag_test_speed import PARSE_ONCE, QUICK_POLL
from matrix_support import DagSession

from kafka_ferry.core.specs.spec import load_spec

# argv: dags folder. The route matrix's session (matrix_support.DagSession): reads one [dag id, run conf] per line and
# runs it with dag.test; its result line carries the run's state, each task's state and try, and the rollback task's
# return value. One process per workspace: one Python, Airflow and DAG parse per test, not one per run.
RUN = PARSE_ONCE + QUICK_POLL + textwrap.dedent("""
    import json, sys, traceback
    from airflow.dag_processing.dagbag import DagBag
    from kafka_ferry.cli.summary import task_results
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    print("@@READY", flush=True)
    for line in sys.stdin:
        dag_id, conf = json.loads(line)
        print("@@RUN-BEGIN", flush=True)
        try:
            run = bag.dags[dag_id].test(run_conf=conf)
            print("\\n@@RUN-ID " + run.run_id, flush=True)
            tasks = {ti.task_id: [str(ti.state).rsplit(".", 1)[-1].lower(), ti.try_number]
                     for ti in run.get_task_instances()}
            result = {"state": str(run.state).rsplit(".", 1)[-1].lower(), "tasks": tasks,
                      "returns": {k: task_results(run).get(k) for k in ("rollback", "migrate_acls")}}
        except BaseException:
            result = {"state": "dag.test raised: " + traceback.format_exc()[-3000:], "tasks": {}}
        print("\\n@@RESULT " + json.dumps(result, default=str), flush=True)
""")

# The workspaces whose DAG process runs: the autouse fixture ``stop_workspaces`` (conftest.py) stops them by pid after
# each test, passed or failed.
OPEN: list[Workspace] = []


def form_conf(mode: str, confirm: str | None = None, **fields) -> dict:
    """The conf the trigger form sends: every field of the form (``dag_promotion.trigger_params``), defaults filled."""
    return {"mode": mode, "confirm_migration": confirm, "allow_rewind": False, "groups": [], "topics": [],
            "waive_groups": [], **fields}


class Workspace:
    """A DAGs folder holding one spec (``migrations/<name>.yaml``) and its DAG stub, and an Airflow home beside it."""

    def __init__(self, tmp_path: Path, spec_path: str | Path) -> None:
        from kafka_ferry.dag_factory import write_stubs

        self.spec = load_spec(spec_path)
        self.dags = tmp_path / "dags"
        (self.dags / "migrations").mkdir(parents=True, exist_ok=True)
        self.spec_path = self.dags / "migrations" / f"{self.spec.name}.yaml"
        shutil.copy(spec_path, self.spec_path)
        write_stubs(self.dags)
        self.env = {k: v for k, v in os.environ.items() if k not in ("AIRFLOW__CORE__UNIT_TEST_MODE", "AIRFLOW_HOME")}
        self.env.update(AIRFLOW_HOME=str(tmp_path / "airflow"), AIRFLOW__CORE__DAGS_FOLDER=str(self.dags),
                        AIRFLOW__CORE__LOAD_EXAMPLES="False", KFERRY_WORK_DIR=str(tmp_path / "work"))
        self._session: DagSession | None = None

    def dag_test(self, conf: dict) -> dict:
        """One run of the DAG with ``conf``: its state, tasks ({id: [state, try]}), the rollback's and the ACL
        migration's return values, the run's id and its log. Runs in the workspace's DAG process, started (after
        ``airflow db migrate``) for the first run and kept for the next ones."""
        if self._session is None:
            airflow = str(Path(sys.executable).parent / "airflow")
            subprocess.run([airflow, "db", "migrate"], env=self.env, check=True, capture_output=True, timeout=600)
            OPEN.append(self)
            self._session = DagSession([sys.executable, "-c", RUN, str(self.dags)], self.env)
        run = self._session.run(self.spec.dag_id, conf, timeout_s=1200)
        assert run.state in ("success", "failed"), run.tail()
        return {"state": run.state, "tasks": {t: list(v) for t, v in run.tasks.items()},
                "rollback": (run.returns or {}).get("rollback"), "acls": (run.returns or {}).get("migrate_acls"),
                "run_id": next((line.split(" ", 1)[1].strip() for line in run.log.splitlines()
                                if line.startswith("@@RUN-ID ")), None), "log": run.log}

    def close(self) -> None:
        """Stops the workspace's DAG process (by pid), if it runs."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def cli(self, *args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kafka_ferry.cli", *map(str, args)], env=self.env,
                              capture_output=True, text=True, timeout=1200, input=stdin)


def states(result: dict) -> dict[str, str]:
    return {task: state for task, (state, _) in result["tasks"].items()}


def stop_by_pid(proc: subprocess.Popen) -> None:
    """Stop a command this test started (its own session) by its pid, SIGKILL after 60 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(60)
