"""Running a migration's real DAG (``dag_factory``) the way a user does: ``dag.test(run_conf=...)`` with the conf the
trigger form sends, or the ``kafka-ferry`` command, each in an Airflow home of the test's own (a subprocess: Airflow's
settings are read once per process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from dag_test_speed import QUICK_POLL

from kafka_ferry.core.spec import load_spec

# argv: dags folder, dag id, run conf (JSON). Prints one RESULT line: the run's state, each task's state and try, and
# the rollback task's return value.
RUN = QUICK_POLL + textwrap.dedent("""
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    from kafka_ferry.cli.summary import task_results
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    run = bag.dags[sys.argv[2]].test(run_conf=json.loads(sys.argv[3]))
    tasks = {ti.task_id: [str(ti.state).rsplit(".", 1)[-1].lower(), ti.try_number] for ti in run.get_task_instances()}
    results = task_results(run)
    print("RESULT " + json.dumps({"state": str(run.state).rsplit(".", 1)[-1].lower(), "tasks": tasks,
                                  "rollback": results.get("rollback")}, default=str))
""")


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
        self._migrated = False

    def dag_test(self, conf: dict) -> dict:
        """One run of the DAG with ``conf``; its RESULT (state, tasks: {id: [state, try]}, rollback), and the log."""
        if not self._migrated:
            airflow = str(Path(sys.executable).parent / "airflow")
            subprocess.run([airflow, "db", "migrate"], env=self.env, check=True, capture_output=True, timeout=600)
            self._migrated = True
        done = subprocess.run([sys.executable, "-c", RUN, str(self.dags), self.spec.dag_id, json.dumps(conf)],
                              env=self.env, capture_output=True, text=True, timeout=1200)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        assert lines, (done.stdout + done.stderr)[-6000:]
        return {**json.loads(lines[-1][7:]), "log": done.stdout + done.stderr}

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kafka_ferry.cli", *map(str, args)], env=self.env,
                              capture_output=True, text=True, timeout=1200, input=stdin)


def states(result: dict) -> dict[str, str]:
    return {task: state for task, (state, _) in result["tasks"].items()}
