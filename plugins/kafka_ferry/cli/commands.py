"""What each `kafka-ferry` command does, once the environment points Airflow at the spec's DAGs folder."""

from __future__ import annotations

import contextlib
import getpass
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kafka_ferry.cli.summary import print_summary
from kafka_ferry.core.common.dates import iso_utc
from kafka_ferry.core.specs.spec import MigrationSpec, load_spec
from kafka_ferry.core.specs.spec_check import dag_file_name
from kafka_ferry.kafka.cluster import KafkaCluster

SHOWN_ACTS = 10  # cutover acts `status` lists (newest first); `status --json` gives SHOWN_ACTS_JSON


def load(spec_path: Path) -> MigrationSpec:
    return load_spec(spec_path)


def connection(conn_id: str):
    """An Airflow connection from the environment (``AIRFLOW_CONN_<ID>``) or the metadata DB.

    Why not ``BaseHook.get_connection``: outside a task, the Task SDK's lookup reads environment variables
    and secrets backends only; this command runs where the metadata DB is, like the scheduler."""
    from airflow.models.connection import Connection

    return Connection.get_connection_from_secrets(conn_id)


def cluster(conn_id: str) -> KafkaCluster:
    """The cluster behind a connection found by ``connection`` (the hook builds the client as in a task)."""
    from kafka_ferry.hooks.kafka_cluster import cluster_of

    return cluster_of(connection(conn_id), conn_id)


def check_bindings(spec: MigrationSpec, spec_path: Path) -> None:
    """What the DAG processor refuses beyond the spec's fields (``core.specs.spec_check.check_at_parse``): another spec
    file of the folder with this name and, with the platform's tenants file, what binds the spec to its tenant."""
    from airflow.sdk import conf

    from kafka_ferry.core.specs.spec_check import check_at_parse
    from kafka_ferry.core.specs.tenants import AIRFLOW_CONFIG, load_tenants, tenants_file_path

    tenants_path = tenants_file_path(configured=conf.get(*AIRFLOW_CONFIG, fallback=None))
    check_at_parse(spec, spec_path, load_tenants(tenants_path) if tenants_path else None, tenants_path)


def acls(spec_path: Path) -> int:
    """The least-privilege ACLs for the topics and groups the spec selects now, per cluster, for the connections'
    principals: those a catch-up and a promotion need (keep them; with ``acls.migrate`` the cluster grants of the
    ACL migration too, also listed on their own), and those only a rollback needs (grant them before a rollback, revoke
    after: ``core.acls.acl_plan``). Reads the clusters' topic and group names only."""
    from kafka_ferry.cli import migrate_db
    from kafka_ferry.core.acls.acl_plan import acl_migration_acls, minimum_acls, rollback_acls
    from kafka_ferry.core.provisioning.provisioning_plan import select_topics

    spec = load_spec(spec_path)
    migrate_db()
    source, destination = cluster(spec.source.connection_id), cluster(spec.destination.connection_id)
    topics = select_topics(spec, source.list_topic_names())
    groups = [g for g in source.list_group_ids() if spec.selects_group(g)]
    who = {side: c.principal or f"<the principal of connection {c.name}>"
           for side, c in (("source", source), ("destination", destination))}
    print(f"migration {spec.name}: {len(topics)} topic(s), {len(groups)} group(s) selected now")
    print("catch-up and promotion (core.acls.acl_plan.minimum_acls; keep granted):")
    for line in minimum_acls(spec, who["source"], who["destination"], topics, groups).lines():
        print(f"  {line}")
    if spec.acls.migrate:
        print("acls.migrate is on: the lines above include what the migrate_acls task needs beyond the copy's minimum "
              "(listing the source's ACLs, listing and creating the destination's):")
        for line in acl_migration_acls(who["source"], who["destination"]).lines():
            print(f"  {line}")
    print("rollback only (core.acls.acl_plan.rollback_acls; grant before a rollback, revoke after):")
    for line in rollback_acls(spec, who["source"], topics, groups).lines():
        print(f"  {line}")
    return 0


def default_user() -> str | None:
    """Who runs the command when ``--as`` is not given: the OS user, as ``airflow dags trigger`` records it."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


@contextlib.contextmanager
def triggered_as(user: str | None) -> Iterator[dict[str, Any]]:
    """``dag.test`` runs triggered by ``user``, recorded on the DAG run as Airflow's own CLI and REST API record
    theirs (``triggering_user_name``, triggered by ``cli``), not as ``dag.test``'s fixed "dag_test".

    Why a wrap: ``dag.test`` has no argument for it and creates its run through ``airflow.models.dagrun.
    get_or_create_dagrun``; the pre-flight checks the run's user against the tenant's promoters, so the run must
    carry the user the command was told to be. ``seen["runs"]`` counts the runs created, so a caller can tell
    an Airflow whose ``dag.test`` stopped calling it (then the run's user is not ``user``: ``run_dag`` says so)."""
    from airflow.models import dagrun
    from airflow.utils.types import DagRunTriggeredByType

    original = dagrun.get_or_create_dagrun
    seen: dict[str, Any] = {"runs": 0}

    def create(*args, **kwargs):
        seen["runs"] += 1
        return original(*args, **{**kwargs, "triggering_user_name": user,
                                  "triggered_by": DagRunTriggeredByType.CLI})

    dagrun.get_or_create_dagrun = create
    try:
        yield seen
    finally:
        dagrun.get_or_create_dagrun = original


def run_dag(spec_path: Path, dags_folder: Path, conf: dict[str, Any], user: str | None = None,
            command: Sequence[str] = (), given_path: str | None = None) -> int:
    """One run of the spec's DAG in this process (``dag.test``), triggered by ``user`` (the pre-flight checks it
    against the tenant's promoters), then what it did. A TERM or INT meanwhile stops it at once, marks the run
    failed and names the way to continue (``cli.interrupt``; ``command`` is this command's arguments,
    ``given_path`` the spec as typed)."""
    from airflow.dag_processing.dagbag import DagBag

    from kafka_ferry.cli import migrate_db

    spec = load_spec(spec_path)
    migrate_db()
    stub = dags_folder / dag_file_name(spec_path.name)
    bag = DagBag(dag_folder=str(stub if stub.exists() else dags_folder))
    if bag.import_errors:
        print("DAG import errors:", json.dumps(bag.import_errors, indent=2))
        return 1
    dag = bag.dags.get(spec.dag_id)
    if dag is None:
        print(f"no DAG {spec.dag_id} in {dags_folder}")
        return 1
    from kafka_ferry.cli.interrupt import RunInterrupts
    from kafka_ferry.cli.progress import RunWatcher

    print(f"running {spec.dag_id} in mode {conf['mode']} as {user!r} ...", flush=True)
    with (RunInterrupts(spec.dag_id, command, given_path or str(spec_path)),
          RunWatcher(spec.dag_id, say=lambda line: print(line, flush=True)), triggered_as(user)):
        run = dag.test(run_conf=conf)
    if run.triggering_user_name != user:
        print(f"warning: the run records triggering user {run.triggering_user_name!r}, not {user!r}: this Airflow's "
              "dag.test did not take the user (kafka_ferry.cli.commands.triggered_as)")
    print_summary(run, spec.name)
    return 0 if str(run.state) in ("success", "DagRunState.SUCCESS") else 1


def status(spec_path: Path) -> int:
    """Per migration: the last batch, the lag now, promoted or not; dates in ISO 8601 (UTC)."""
    from kafka_ferry.cli import migrate_db
    from kafka_ferry.cli.progress import wait_lines
    from kafka_ferry.copy.plan import work_dir
    from kafka_ferry.core.common.state_records import ACT_KIND, MIGRATION_KEY
    from kafka_ferry.core.cutover.authority import act_line, acts_newest_first
    from kafka_ferry.core.provisioning.provisioning_plan import select_topics
    from kafka_ferry.promotion.readiness import replication_lag
    from kafka_ferry.promotion.rollback import STEPS as ROLLBACK_STEPS
    from kafka_ferry.promotion.steps import STEPS as PROMOTION_STEPS
    from kafka_ferry.reports.publish import OVERVIEW_FILE, run_page_path
    from kafka_ferry.state.backlog import read_backlog
    from kafka_ferry.state.batches import batch_history
    from kafka_ferry.state.promotion import PROMOTED, promotion_records
    from kafka_ferry.state.rollback import rollback_records
    from kafka_ferry.state.store import MigrationStateStore
    from kafka_ferry.storage.workdir import read_text

    spec = load_spec(spec_path)
    migrate_db()
    source, destination = cluster(spec.source.connection_id), cluster(spec.destination.connection_id)
    print(f"migration {spec.name} (DAG {spec.dag_id}, tenant {spec.tenant})")
    if spec.state_topic_name not in destination.list_topic_names():
        print("  never ran: no state topic on the destination yet (start with `kafka-ferry dry-run`)")
        print_runs(spec.dag_id)
        return 0
    store = MigrationStateStore(destination, spec.state_topic_name)
    history = batch_history(store)
    if history:
        last = history[-1]
        print(f"  last batch: {last.get('batch_id')}, finished {iso_utc(last.get('finished_at_ms'))}, "
              f"{last.get('records_copied', 0)} record(s) copied, lag after it {last.get('lag_after_total')} "
              f"({len(history)} batch(es) in all)")
    else:
        print("  last batch: none yet")
    lag = replication_lag(source, store, select_topics(spec, source.list_topic_names()))
    print(f"  lag now: {lag['total_lag']} record(s) over {lag['partitions']} partition(s), "
          f"max {lag['max_lag']}" + (f" on {lag['worst']}" if lag["max_lag"] else ""))
    backlog = read_backlog(store)
    if backlog:  # the last batch's ETA (state kind "backlog"), as its run page shows it
        print(f"  ETA after batch {backlog[-1].get('batch_id')}: {backlog[-1].get('sentence')}")
    promotion = promotion_records(store)
    promoted = promotion.get(MIGRATION_KEY) or {}
    if promoted.get("status") == PROMOTED:
        print(f"  promoted: yes, at {iso_utc(promoted.get('promoted_at_ms'))} (copy runs are refused; "
              f"`kafka-ferry rollback-plan {spec_path}` shows the way back, `kafka-ferry rollback {spec_path}` "
              "takes it)")
    else:
        print("  promoted: no")
        for line in wait_lines(promotion, PROMOTION_STEPS, "promotion"):
            print(f"  {line}")
    undone = rollback_records(store)
    current = [s for s in ROLLBACK_STEPS
               if (undone.get(f"step/{s}") or {}).get("promoted_at_ms") == promoted.get("promoted_at_ms")]
    if promoted.get("status") == PROMOTED and current:
        for line in wait_lines({f"step/{s}": undone[f"step/{s}"] for s in current}, ROLLBACK_STEPS, "rollback"):
            print(f"  {line} (`kafka-ferry rollback {spec_path}` resumes it)")
    acts = acts_newest_first(store.read_kind(ACT_KIND))
    if acts:  # who promoted, rolled back or reset (state kind act), newest first
        print(f"  who did it ({min(len(acts), SHOWN_ACTS)} of {len(acts)} cutover act(s), newest first):")
        for record in acts[:SHOWN_ACTS]:
            print(f"    {act_line(record)}")
    print_runs(spec.dag_id)
    overview = work_dir(spec.name) / OVERVIEW_FILE
    if overview.exists():
        row = json.loads(read_text(overview))
        page = run_page_path(overview.parent, row["last_run_id"]) if row.get("last_run_id") else None
        print(f"  last run here: {row.get('last_run_id')}, at {iso_utc(row.get('updated_at_ms'))}"
              + (f", page {page}" if page and page.exists() else ""))
    return 0


def print_runs(dag_id: str, limit: int = 5) -> None:
    """The DAG's last runs from Airflow's metadata DB: those in flight or failed, with their active or failed tasks
    (which step, since when, what a sensor waits for); a finished good run in one line."""
    from kafka_ferry.cli.progress import run_lines, runs

    found = runs(dag_id, limit)
    if not found:
        print("  runs: none recorded in this Airflow's metadata DB")
        return
    print(f"  last {len(found)} run(s) of {dag_id}, newest first:")
    for run in found:
        lines = run_lines(run)
        for line in lines if run["state"] != "success" else lines[:1]:
            print(f"    {line}")


def reset(spec_path: Path, give_up_rollback: bool = False, user: str | None = None, confirmed: str | None = None
          ) -> int:
    """Delete the promotion records, so catch-up runs copy again (confirmed by the caller). Refused (exit 1,
    nothing changed) while the promotion can be rolled back, unless ``give_up_rollback``, and when the tenant's
    promoters do not list ``user`` (no DAG runs: checked here as the pre-flight checks a run). A reset done is
    recorded (state kind ``act``) with the user and the confirmation."""
    from kafka_ferry.cli import migrate_db
    from kafka_ferry.core.common.state_records import ACT_KIND
    from kafka_ferry.core.cutover.authority import (
        RESET_PROMOTION,
        NotAllowed,
        act_key,
        act_record,
        allowed_by,
        check_authority,
        finished,
    )
    from kafka_ferry.operators.authority import actor, promoters_of
    from kafka_ferry.state.promotion import RollbackStillPossible, reset_promotion, rollback_possible
    from kafka_ferry.state.store import MigrationStateStore

    spec = load_spec(spec_path)
    migrate_db()
    promoters, where = promoters_of(spec)
    asking = actor(user, None, promoters)
    try:
        check_authority(RESET_PROMOTION, spec.name, spec.tenant, promoters, asking, where)
    except NotAllowed as exc:
        print(str(exc))
        return 1
    destination = cluster(spec.destination.connection_id)
    if spec.state_topic_name not in destination.list_topic_names():
        print(f"{spec.name} never ran: nothing to reset")
        return 0
    store = MigrationStateStore(destination, spec.state_topic_name)
    possible = rollback_possible(store)
    try:
        removed = reset_promotion(store, give_up_rollback=give_up_rollback)
    except RollbackStillPossible as exc:
        print(str(exc).replace("<spec>", str(spec_path)))
        return 1
    now_ms = int(time.time() * 1000)
    run_id = f"cli__{iso_utc(now_ms)}"
    if removed:  # a reset that removed nothing changed nothing: no act (a refusal above records none either)
        store.put(ACT_KIND, act_key(RESET_PROMOTION, run_id), finished(
            act_record(RESET_PROMOTION, spec.name, asking, confirmed, run_id, now_ms,
                       allowed=allowed_by(RESET_PROMOTION, promoters, asking)), now_ms))
    if possible:
        print(f"the rollback of {spec.name} is given up (--give-up-rollback): after this reset no rollback can "
              "bring the destination's records back to the source")
    print(f"promotion of {spec.name} reset: {len(removed)} promotion record(s) removed" if removed
          else f"{spec.name} had no promotion records: nothing to reset")
    return 0
