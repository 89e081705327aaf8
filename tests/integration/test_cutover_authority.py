"""Who may cut over, and who did (issue 42), through the routes a user takes: the migration's real DAG run with
``dag.test(run_conf=...)`` as the form sends it, the run carrying its triggering user as the UI, the REST API and
``kafka-ferry --as`` record it (``DagRun.triggering_user_name``), and the ``kafka-ferry`` command.

One migration, one Airflow home, one DAG process: a tenant whose promoters list one user (alice). A promotion
triggered by bob, and one by a scheduled run, are refused in the pre-flight (one try, naming the user and the
list) with both clusters exactly as before; alice's promotion succeeds and its ``act`` record names her, her
confirmation and the run; then through the CLI, ``rollback --as bob`` and ``reset-promotion --as bob`` are refused
with nothing changed, carol (a listed role in the FAB auth manager's tables, read where the metadata DB is) passes
the check, and ``status`` (lines and ``--json``) says who promoted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from dag_test_speed import PARSE_ONCE, QUICK_POLL
from matrix_support import DagSession, RunResult
from route_support import Workspace, form_conf
from scenarios import commit_source_group, seed_plain, snapshot, write_spec

from airflow_stack import FAB_AUTH_MANAGER
from kafka_ferry.core.common.state_records import ACT_KIND
from kafka_ferry.state.promotion import promotion_status
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.long]

# argv: dags folder. Reads [dag id, run conf, triggering user, run type] per line: each run is created as dag.test
# creates it, then carries the user as the UI / REST API / `kafka-ferry --as` record it (``triggered_as``), and for
# run type "scheduled" is the scheduler's run (no user, run type scheduled).
RUN_AS = PARSE_ONCE + QUICK_POLL + textwrap.dedent("""
    import json, sys, traceback
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models import dagrun
    from airflow.utils.types import DagRunType
    from kafka_ferry.cli.commands import triggered_as
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    created = dagrun.get_or_create_dagrun
    print("@@READY", flush=True)
    for line in sys.stdin:
        dag_id, conf, user, run_type = json.loads(line)

        def as_scheduled(**kwargs):
            run = created(**kwargs)
            if run_type != "manual":
                run.run_type, run.triggering_user_name = DagRunType(run_type), None
                kwargs["session"].merge(run)
                kwargs["session"].commit()
            return run

        dagrun.get_or_create_dagrun = as_scheduled
        print("@@RUN-BEGIN", flush=True)
        try:
            with triggered_as(user):
                run = bag.get_dag(dag_id).test(run_conf=conf)
            tasks = {ti.task_id: [str(ti.state).rsplit(".", 1)[-1].lower(), ti.try_number]
                     for ti in run.get_task_instances()}
            result = {"state": str(run.state).rsplit(".", 1)[-1].lower(), "tasks": tasks, "run_id": run.run_id,
                      "user": run.triggering_user_name, "run_type": str(run.run_type)}
        except BaseException:
            result = {"state": "dag.test raised: " + traceback.format_exc()[-3000:], "tasks": {}}
        finally:
            dagrun.get_or_create_dagrun = created
        print("\\n@@RESULT " + json.dumps(result), flush=True)
""")


@dataclass
class AuthoredRun(RunResult):
    """A run's outcome and who it was recorded as triggered by (run id, user, run type)."""

    run_id: str | None = None
    user: str | None = None
    run_type: str | None = None


def run_as(session: DagSession, dag_id: str, conf: dict, user: str | None, run_type: str = "manual") -> AuthoredRun:
    stdin = session.proc.stdin
    assert stdin is not None  # the session's interpreter reads its runs from a pipe
    stdin.write(json.dumps([dag_id, conf, user, run_type]) + "\n")
    stdin.flush()
    lines = session._until("@@RESULT ", 1800)
    result = json.loads(lines[-1][len("@@RESULT "):])
    return AuthoredRun(conf, result["state"], {t: tuple(v) for t, v in result["tasks"].items()}, "".join(lines),
                       run_id=result.get("run_id"), user=result.get("user"), run_type=result.get("run_type"))


@pytest.fixture(scope="module")
def promoted(clusters, tmp_path_factory):
    """The one expensive state: refused runs first (each checked against a snapshot of both clusters), then
    alice's promotion through the DAG. Yields what the tests read."""
    tmp_path = tmp_path_factory.mktemp("authority")
    p = clusters.unique("auth")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, 20)
    commit_source_group(clusters, f"{p}-g", {(topic, 0): 8, (topic, 1): 12})
    spec_path = write_spec(tmp_path, clusters, p, promotion={"quiesce_window_seconds": 1, "poke_interval_seconds": 1})
    ws = Workspace(tmp_path / "ws", spec_path)  # the spec in <dags>/migrations/, for the CLI below
    name = ws.spec.name
    tenants = ws.dags / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"tenants": {"test": {
        "spec_paths": ["migrations/*.yaml"], "name_prefixes": [name],
        "connections": [clusters.SOURCE_CONN, clusters.DESTINATION_CONN, clusters.SPARK_CONN],
        "state_topics": [ws.spec.state_topic_name], "destination_topic_prefixes": [""],
        "promoters": {"users": ["alice"], "roles": ["cutover"]}}}}))
    ws.env.update(KFERRY_TENANTS_FILE=str(tenants), PYTHONUNBUFFERED="1")
    # one Airflow home and DAGs folder for the DAG process and the CLI after it (the spec file owns the state topic);
    # the FAB auth manager's tables in its DB, with carol holding role "cutover" (roles are read where the DB is)
    fab = {**ws.env, "AIRFLOW__CORE__AUTH_MANAGER": FAB_AUTH_MANAGER}
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=fab, check=True, capture_output=True, timeout=600)
    subprocess.run([airflow, "roles", "create", "cutover"], env=fab, check=True, capture_output=True, timeout=600)
    subprocess.run([airflow, "users", "create", "--username", "carol", "--role", "cutover", "--firstname", "carol",
                    "--lastname", "test", "--email", "carol@example.invalid"], env=fab, check=True,
                   capture_output=True, timeout=600, input=b"pw-carol\npw-carol\n", start_new_session=True)
    session = DagSession([sys.executable, "-c", RUN_AS, str(ws.dags)], ws.env)
    try:
        caught_up = run_as(session, ws.spec.dag_id, form_conf("catch-up"), "bob")  # no authority needed
        assert caught_up.state == "success", caught_up.tail()
        before = snapshot(clusters, p)
        refused = {"bob": run_as(session, ws.spec.dag_id, form_conf("promote", name), "bob"),
                   "scheduled": run_as(session, ws.spec.dag_id, form_conf("promote", name), None, "scheduled")}
        after_refusals = snapshot(clusters, p)
        done = run_as(session, ws.spec.dag_id, form_conf("promote", name), "alice")
        assert done.state == "success", done.tail()
    finally:
        session.close()
    ws.env.update(AIRFLOW__CORE__AUTH_MANAGER=FAB_AUTH_MANAGER)  # the CLI below reads carol's roles
    yield {"p": p, "name": name, "ws": ws, "refused": refused, "done": done, "before": before,
           "after_refusals": after_refusals,
           "store": MigrationStateStore(clusters.cluster("destination"), ws.spec.state_topic_name)}


def test_a_promotion_by_a_user_not_listed_or_by_a_scheduled_run_is_refused_before_any_change(promoted):
    bob, scheduled = promoted["refused"]["bob"], promoted["refused"]["scheduled"]
    assert bob.user == "bob" and bob.run_type == "manual"  # the run carries its user as the UI's would
    assert bob.state == "failed" and bob.tasks["preflight"] == ("failed", 1), bob.tail()  # once: no retry
    assert (f"promote of migration '{promoted['name']}' refused before any change: user 'bob' (no role) is not "
            "one of tenant 'test''s promoters (users ['alice'], roles ['cutover'], tenants file") in bob.log, bob.tail()
    assert scheduled.run_type == "scheduled" and scheduled.user is None
    assert scheduled.state == "failed" and scheduled.tasks["preflight"] == ("failed", 1), scheduled.tail()
    assert "this is a scheduled run, which no person triggered" in scheduled.log, scheduled.tail()
    for run in (bob, scheduled):
        assert run.tasks["provision_topics"][0] != "success" and run.tasks["promote_reconcile_mark"][0] != "success"
    assert promoted["after_refusals"] == promoted["before"]  # both clusters exactly as before, state topic too


def test_the_listed_users_promotion_succeeds_and_its_record_names_her(promoted):
    done, store = promoted["done"], promoted["store"]
    assert done.user == "alice"
    status = promotion_status(store)
    assert status is not None and status["status"] == "promoted"
    acts = store.read_kind(ACT_KIND)
    assert list(acts) == [f"promote/{done.run_id}"]  # the refused runs recorded nothing
    act = acts[f"promote/{done.run_id}"]
    assert {k: act[k] for k in ("record_version", "action", "user", "confirmation", "run_id", "run_type", "status",
                                "allowed_by")} == {
        "record_version": 1, "action": "promote", "user": "alice", "confirmation": promoted["name"],
        "run_id": done.run_id, "run_type": "manual", "status": "done", "allowed_by": "user 'alice' listed"}
    assert act["started_at_ms"] <= act["finished_at_ms"]


def test_the_cli_runs_as_its_user_refuses_a_rollback_and_a_reset_by_another_and_says_who_promoted(
        promoted, clusters):
    ws, name, p = promoted["ws"], promoted["name"], promoted["p"]
    before = snapshot(clusters, p)
    rollback = ws.cli("rollback", ws.spec_path, "--as", "bob", "--yes-i-mean", name)
    assert rollback.returncode == 1, (rollback.stdout + rollback.stderr)[-6000:]
    assert "in mode rollback as 'bob'" in rollback.stdout
    out = rollback.stdout + rollback.stderr
    assert f"rollback of migration '{name}' refused before any change: user 'bob'" in out, out[-6000:]
    reset = ws.cli("reset-promotion", ws.spec_path, "--as", "bob", "--yes-i-mean", name)
    assert reset.returncode == 1, (reset.stdout + reset.stderr)[-6000:]
    assert f"reset-promotion of migration '{name}' refused before any change: user 'bob'" in reset.stdout
    # carol is no listed user, but holds a listed role: her reset passes the check and stops at the next one (the
    # promotion can still be rolled back), changing nothing
    carol = ws.cli("reset-promotion", ws.spec_path, "--as", "carol", "--yes-i-mean", name)
    assert carol.returncode == 1 and "can still be rolled back" in carol.stdout, carol.stdout + carol.stderr
    assert "refused before any change: user" not in carol.stdout
    assert snapshot(clusters, p) == before
    status = promotion_status(promoted["store"])
    assert status is not None and status["status"] == "promoted"

    status = ws.cli("status", ws.spec_path)
    assert status.returncode == 0, status.stdout + status.stderr
    assert (f"promote by 'alice', confirmed '{name}', run {promoted['done'].run_id}") in status.stdout, status.stdout
    as_json = ws.cli("status", ws.spec_path, "--json")
    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    acts = json.loads(as_json.stdout)["acts"]
    assert [(a["action"], a["user"], a["status"]) for a in acts] == [("promote", "alice", "done")]
