"""`kafka-ferry`: one migration spec, driven through its own Airflow DAG from a shell.

A convenience beside Airflow, not a second scheduler: `dry-run`, `run`, `promote`, `promote-groups`,
`promote-topics`, `rollback` and `rollback-plan` (every mode of the trigger form) run the spec's DAG once with
``dag.test(run_conf=...)`` (the same tasks, retries and fail-fast rules as a scheduled run, on this machine,
recorded in the metadata DB), with the run conf the trigger form sends. `check`, `status`, `acls` and
`reset-promotion` read the clusters directly; `verify-evidence` checks a cutover's evidence bundle. Connections
come from Airflow: environment variables (``AIRFLOW_CONN_<ID>``) or the metadata DB (``airflow connections add``).

The spec must sit in ``<dags folder>/migrations/<name>.yaml`` (the layout the DAG processor reads);
the commands that run the DAG write its missing DAG stub beside it (``migration_<name>.py``; `check`,
`status` and `acls` write nothing) and point Airflow's ``dags_folder`` at that folder for their own run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from kafka_ferry.core.common.failures import Permanent

# command -> the trigger form's mode (core.specs.trigger_form.MODES)
MODES = {"dry-run": "dry-run", "run": "catch-up", "promote": "promote", "promote-groups": "promote-groups",
         "promote-topics": "promote-topics", "rollback": "rollback", "rollback-plan": "rollback-plan"}
CONFIRMED = {"promote": "promote", "promote-groups": "promote groups of", "promote-topics": "promote topics of",
             "rollback": "roll back"}
JSON_COMMANDS = ("check", "status", "dry-run")  # the commands with `--json`


class UsageError(Permanent):
    """A wrong invocation (exit 2), said in one line."""


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="kafka-ferry", description=__doc__.split("\n\n")[0])
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    helps = {
        "check": "validate the spec, its connections, both clusters and what it selects (changes nothing)",
        "dry-run": "run the DAG in mode dry-run: pre-flight and plans, nothing changes",
        "run": "run the DAG in mode catch-up: provision, one copy batch, translate offsets",
        "promote": "run the DAG in mode promote (sensor-gated cutover); asks for the migration's name",
        "promote-groups": "run the DAG in mode promote-groups: move the named consumer groups; asks for the name",
        "promote-topics": "run the DAG in mode promote-topics: move the named topics' producers; asks for the name",
        "rollback": "run the DAG in mode rollback: back to the source after a cutover; asks for the migration's name",
        "rollback-plan": "run the DAG in mode rollback-plan: print what a rollback would do, change nothing",
        "status": "last batch, lag, promoted or not, runs in flight, failed or half-finished (ISO 8601, UTC)",
        "acls": "the ACLs the migration's principals need: always (catch-up, promotion) and for a rollback only",
        "reset-promotion": "lift the promotion so copy runs are allowed again; asks for the migration's name",
    }
    for name, text in helps.items():
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("spec", help="the migration's YAML file, in <dags folder>/migrations/")
        if name in JSON_COMMANDS:
            command.add_argument("--json", action="store_true",
                                 help="one JSON document on stdout instead of the lines (kafka_ferry/cli/as_json.py)")
        if name in (*CONFIRMED, "reset-promotion"):
            command.add_argument("--yes-i-mean", metavar="NAME",
                                 help="confirm without a prompt (scripts): the migration's name")
        if name in (*MODES, "reset-promotion"):
            command.add_argument("--as", dest="as_user", metavar="USER",
                                 help="the Airflow user the run is triggered by (recorded on the run and, for a "
                                      "cutover, in the migration's state; checked against the tenant's promoters); "
                                      "default: the OS user, as `airflow dags trigger` records it")
        if name in ("promote", "promote-groups"):
            command.add_argument("--allow-rewind", action="store_true",
                                 help="the promotion may move a destination group's offsets backwards")
        if name == "promote-groups":
            command.add_argument("names", nargs="+", metavar="GROUP", help="source consumer groups to promote")
        if name == "promote-topics":
            command.add_argument("names", nargs="+", metavar="TOPIC", help="source topics to promote")
            command.add_argument("--waive-groups", nargs="+", default=[], metavar="GROUP",
                                 help="reading groups that may stay unpromoted")
        if name in ("rollback", "rollback-plan"):
            command.add_argument("--groups", nargs="+", default=[], metavar="GROUP",
                                 help="only these promoted groups go back (a staged cutover)")
            command.add_argument("--topics", nargs="+", default=[], metavar="TOPIC",
                                 help="only these promoted topics go back, with the groups reading them")
        if name == "reset-promotion":
            command.add_argument("--give-up-rollback", action="store_true",
                                 help="reset even though the promotion could still be rolled back: the rollback "
                                      "is given up for good")
    from kafka_ferry.cli.checkpoint import add_parser as add_checkpoint_parser

    add_checkpoint_parser(commands)
    from kafka_ferry.cli.evidence import add_parser as add_evidence_parser

    add_evidence_parser(commands)
    return top


def run_conf(args: argparse.Namespace, confirmed: str | None) -> dict:
    """The conf the trigger form sends for this command: every field of the form, the mode's own filled in."""
    conf = {"mode": MODES[args.command], "confirm_migration": confirmed,
            "allow_rewind": bool(getattr(args, "allow_rewind", False)), "groups": [], "topics": [],
            "waive_groups": list(getattr(args, "waive_groups", []))}
    if args.command == "promote-groups":
        conf["groups"] = list(args.names)
    elif args.command == "promote-topics":
        conf["topics"] = list(args.names)
    elif args.command in ("rollback", "rollback-plan"):
        conf["groups"], conf["topics"] = list(args.groups), list(args.topics)
    return conf


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "verify-evidence":  # a bundle, not a spec, is its argument (the spec is optional)
            from kafka_ferry.cli.evidence import run as verify_evidence

            if args.spec:
                prepare_environment(Path(args.spec).resolve())
            return verify_evidence(args)
        spec_path = Path(args.spec).resolve()
        dags_folder = prepare_environment(spec_path)
        from kafka_ferry.cli import commands

        if getattr(args, "json", False):
            from kafka_ferry.cli.as_json import run_json

            if args.command == "dry-run":
                write_own_stub(spec_path, dags_folder)

            return run_json(args.command, spec_path, dags_folder, user(args))
        if args.command == "check":  # every connection the spec names, one verdict each (cli.checks)
            from kafka_ferry.cli.checks import check

            return check(spec_path)
        if args.command == "status":
            return commands.status(spec_path)
        if args.command == "acls":
            return commands.acls(spec_path)
        if args.command == "checkpoint":
            from kafka_ferry.cli.checkpoint import run as checkpoint

            return checkpoint(spec_path, args)
        spec = commands.load(spec_path)
        if args.command == "reset-promotion":
            typed = confirm(spec.name, args.yes_i_mean, "reset the promotion of")
            return commands.reset(spec_path, give_up_rollback=args.give_up_rollback, user=user(args),
                                  confirmed=typed)
        confirmed = (confirm(spec.name, args.yes_i_mean, CONFIRMED[args.command])
                     if args.command in CONFIRMED else None)
        write_own_stub(spec_path, dags_folder)
        return commands.run_dag(spec_path, dags_folder, run_conf(args, confirmed), user=user(args),
                                command=list(sys.argv[1:] if argv is None else argv), given_path=args.spec)
    except UsageError as exc:
        print(f"kafka-ferry: {exc}", file=sys.stderr)
        return 2


def user(args: argparse.Namespace) -> str | None:
    """``--as USER``, else the OS user; a blank or unprintable name is no user (exit 2)."""
    from kafka_ferry.cli.commands import default_user

    given = getattr(args, "as_user", None)
    if given is None:
        return default_user()
    if not given.strip() or not given.isprintable() or len(given) > 512:
        raise UsageError(f"--as {given!r}: an Airflow user name is 1-512 printable characters")
    return given.strip()


def prepare_environment(spec_path: Path) -> Path:
    """Point this process's Airflow at the spec's DAGs folder (before Airflow is imported); writes nothing."""
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
    # dag.test runs without a scheduler, the component that activates the topic assets the copy's asset alias
    # emits events for: the first events warn "AssetModel ... not found" / "Emitting event for inactive
    # AssetModel", which a user cannot act on (a scheduled run activates them). At INFO they show again.
    if os.environ["AIRFLOW__LOGGING__LOGGING_LEVEL"].upper() not in ("DEBUG", "INFO"):
        os.environ.setdefault("AIRFLOW__LOGGING__NAMESPACE_LEVELS", "airflow.assets.manager=ERROR")
    return dags_folder


def write_own_stub(spec_path: Path, dags_folder: Path) -> None:
    """The DAG file of this spec only, for the commands that run its DAG (`check`, `status`, `acls` write
    nothing); a name that is unsafe or shares its DAG file with another spec's stops here, naming both."""
    from kafka_ferry.dag_factory import write_stubs

    refused: list[str] = []
    write_stubs(dags_folder, refused, only=spec_path.name)
    if refused:
        raise UsageError("; ".join(refused))


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
