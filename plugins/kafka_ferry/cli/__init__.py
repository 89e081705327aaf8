"""`kafka-ferry`: one migration spec, driven through its own Airflow DAG from a shell.

A convenience beside Airflow, not a second scheduler: `dry-run`, `run` and `promote` run the spec's DAG
once with ``dag.test(run_conf=...)`` (the same tasks, retries and fail-fast rules as a scheduled run, on
this machine, recorded in the metadata DB), exactly as the trigger form would. `check`, `status`, `acls` and
`reset-promotion` read the clusters directly. Connections come from Airflow: environment variables
(``AIRFLOW_CONN_<ID>``) or the metadata DB (``airflow connections add``).

The spec must sit in ``<dags folder>/migrations/<name>.yaml`` (the layout the DAG processor reads);
the command writes the missing DAG stub beside it (``migration_<name>.py``) and points Airflow's
``dags_folder`` at that folder for its own run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

MODES = {"dry-run": "dry-run", "run": "catch-up", "promote": "promote"}


class UsageError(Exception):
    """A wrong invocation (exit 2), said in one line."""


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="kafka-ferry", description=__doc__.split("\n\n")[0])
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    helps = {
        "check": "validate the spec, its connections, both clusters and what it selects (changes nothing)",
        "dry-run": "run the DAG in mode dry-run: pre-flight and plans, nothing changes",
        "run": "run the DAG in mode catch-up: provision, one copy batch, translate offsets",
        "promote": "run the DAG in mode promote (sensor-gated cutover); asks for the migration's name",
        "status": "last batch, lag, promoted or not (dates in ISO 8601, UTC)",
        "acls": "the ACLs the migration's principals need: always (catch-up, promotion) and for a rollback only",
        "reset-promotion": "lift the promotion so copy runs are allowed again; asks for the migration's name",
    }
    for name, text in helps.items():
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("spec", help="the migration's YAML file, in <dags folder>/migrations/")
        if name in ("promote", "reset-promotion"):
            command.add_argument("--yes-i-mean", metavar="NAME",
                                 help="confirm without a prompt (scripts): the migration's name")
    from kafka_ferry.cli.checkpoint import add_parser as add_checkpoint_parser

    add_checkpoint_parser(commands)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        spec_path = Path(args.spec).resolve()
        dags_folder = prepare_environment(spec_path)
        from kafka_ferry.cli import commands

        if args.command == "check":
            return commands.check(spec_path)
        if args.command == "status":
            return commands.status(spec_path)
        if args.command == "acls":
            return commands.acls(spec_path)
        if args.command == "checkpoint":
            from kafka_ferry.cli.checkpoint import run as checkpoint

            return checkpoint(spec_path, args)
        spec = commands.load(spec_path)
        if args.command == "reset-promotion":
            confirm(spec.name, args.yes_i_mean, "reset the promotion of")
            return commands.reset(spec_path)
        conf = {"mode": MODES[args.command]}
        if args.command == "promote":
            conf["confirm_migration"] = confirm(spec.name, args.yes_i_mean, "promote")
        return commands.run_dag(spec_path, dags_folder, conf)
    except UsageError as exc:
        print(f"kafka-ferry: {exc}", file=sys.stderr)
        return 2


def prepare_environment(spec_path: Path) -> Path:
    """Point this process's Airflow at the spec's DAGs folder (before Airflow is imported) and write its stub."""
    if not spec_path.is_file():
        raise UsageError(f"{spec_path}: no such file")
    if spec_path.parent.name != "migrations":
        raise UsageError(f"{spec_path}: a migration spec lives in <dags folder>/migrations/ (the DAG processor "
                         "reads it there); move it into such a folder")
    dags_folder = spec_path.parent.parent
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags_folder)
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    # Airflow's own INFO lines of every task would bury the summary; KFERRY_LOG_LEVEL=INFO shows them
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", os.environ.get("KFERRY_LOG_LEVEL", "WARNING"))
    from kafka_ferry.dag_factory import write_stubs

    write_stubs(dags_folder)
    return dags_folder


def confirm(name: str, given: str | None, action: str) -> str:
    """The migration's name, typed at the prompt or given as ``--yes-i-mean``; anything else stops here."""
    if given is None:
        if not sys.stdin.isatty():
            raise UsageError(f"to {action} {name!r} without a terminal, pass --yes-i-mean {name}")
        given = input(f"This will {action} migration {name!r}. Type its name to confirm: ").strip()
    if given != name:
        raise UsageError(f"not confirmed: {given!r} is not the migration's name {name!r}; nothing was done")
    return given


def migrate_db() -> None:
    """``airflow db migrate``: idempotent, and the first command in a new AIRFLOW_HOME needs it."""
    done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env={**os.environ},
                          capture_output=True, text=True)
    if done.returncode:
        raise UsageError(f"airflow db migrate failed:\n{(done.stdout + done.stderr)[-2000:]}")
