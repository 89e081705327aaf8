"""`kafka-ferry check|status|dry-run --json`: the same facts as the lines, as one JSON document on stdout.

For scripts and dashboards: stdout holds only the document (a dry run's task logs go to stderr), dates are
ISO 8601 in UTC as in the lines, and the exit code is the command's. Built beside the line printers, not from their
text, so the lines can change wording without breaking a consumer.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

SHOWN_ACTS_JSON = 100  # cutover acts `status --json` gives, newest first


def emit(document: dict[str, Any]) -> None:
    print(json.dumps(document, indent=1, sort_keys=True, default=str))


def check_json(spec_path: Path) -> int:
    from kafka_ferry.cli.checks import check_report

    with contextlib.redirect_stdout(sys.stderr):
        report = check_report(spec_path)
    emit({"command": "check", **report.as_dict()})
    return 0 if report.ok else 1


def status_json(spec_path: Path) -> int:
    """What `status` prints: the last batch, the lag now, the last ETA, promoted or not."""
    from kafka_ferry.cli import migrate_db
    from kafka_ferry.cli.commands import cluster
    from kafka_ferry.core.common.dates import iso_utc
    from kafka_ferry.core.common.state_records import ACT_KIND
    from kafka_ferry.core.cutover.authority import acts_newest_first
    from kafka_ferry.core.provisioning.provisioning_plan import select_topics
    from kafka_ferry.core.specs.spec import load_spec
    from kafka_ferry.promotion.readiness import replication_lag
    from kafka_ferry.state.backlog import read_backlog
    from kafka_ferry.state.batches import batch_history
    from kafka_ferry.state.promotion import PROMOTED, promotion_status
    from kafka_ferry.state.store import MigrationStateStore

    spec = load_spec(spec_path)
    with contextlib.redirect_stdout(sys.stderr):
        migrate_db()
    source, destination = cluster(spec.source.connection_id), cluster(spec.destination.connection_id)
    doc: dict[str, Any] = {"command": "status", "migration": spec.name, "dag_id": spec.dag_id, "tenant": spec.tenant,
                           "ran": spec.state_topic_name in destination.list_topic_names(), "promoted": False}
    if not doc["ran"]:
        emit(doc)
        return 0
    store = MigrationStateStore(destination, spec.state_topic_name)
    history = batch_history(store)
    if history:
        last = history[-1]
        doc["last_batch"] = {"batch_id": last.get("batch_id"), "finished_at": iso_utc(last.get("finished_at_ms")),
                             "records_copied": last.get("records_copied", 0),
                             "lag_after": last.get("lag_after_total")}
    doc["batches"] = len(history)
    lag = replication_lag(source, store, select_topics(spec, source.list_topic_names()))
    doc["lag_now"] = {"total": lag["total_lag"], "partitions": lag["partitions"], "max": lag["max_lag"],
                      "worst": lag["worst"] if lag["max_lag"] else None}
    backlog = read_backlog(store)
    if backlog:
        doc["eta"] = {"after_batch": backlog[-1].get("batch_id"), "sentence": backlog[-1].get("sentence")}
    promoted = promotion_status(store) or {}
    doc["promoted"] = promoted.get("status") == PROMOTED
    if doc["promoted"]:
        doc["promoted_at"] = iso_utc(promoted.get("promoted_at_ms"))
    # who promoted, rolled back or reset (state kind act, core.cutover.authority.act_record), newest first
    doc["acts"] = [{**r, "started_at": iso_utc(r.get("started_at_ms")),
                    "finished_at": iso_utc(r.get("finished_at_ms")) if r.get("finished_at_ms") else None}
                   for r in acts_newest_first(store.read_kind(ACT_KIND))[:SHOWN_ACTS_JSON]]
    emit(doc)
    return 0


def dry_run_json(spec_path: Path, dags_folder: Path, user: str | None = None) -> int:
    """The dry run's DAG run (tasks, pre-flight diff, schema plan, the first batch's ranges and the estimate)."""
    code, run, results = _run_dag(spec_path, dags_folder, {"mode": "dry-run"}, user)
    doc: dict[str, Any] = {"command": "dry-run", "ok": code == 0}
    if run is None:
        doc["problem"] = results
        emit(doc)
        return code
    plan = results.get("plan_copy") or {}
    doc.update(run_id=run.run_id, state=str(run.state).rsplit(".", 1)[-1].lower(),
               tasks={ti.task_id: str(ti.state).rsplit(".", 1)[-1].lower() for ti in run.get_task_instances()},
               preflight=results.get("preflight"), schemas=results.get("migrate_schemas"),
               acls=results.get("migrate_acls"),
               first_batch={"partitions": plan.get("partitions"), "offsets": plan.get("offsets"),
                            "ranges": plan.get("ranges", []), "estimate": plan.get("estimate")})
    emit(doc)
    return code


def _run_dag(spec_path: Path, dags_folder: Path, conf: dict[str, Any], user: str | None = None
             ) -> tuple[int, Any, Any]:
    """`commands.run_dag` without its lines: (exit code, the DAG run or None, its XCom results or the problem);
    everything the run prints goes to stderr."""
    from airflow.dag_processing.dagbag import DagBag

    from kafka_ferry.cli import migrate_db
    from kafka_ferry.cli.commands import triggered_as
    from kafka_ferry.cli.summary import task_results
    from kafka_ferry.core.specs.spec import load_spec
    from kafka_ferry.core.specs.spec_check import dag_file_name

    spec = load_spec(spec_path)
    with contextlib.redirect_stdout(sys.stderr):
        migrate_db()
        stub = dags_folder / dag_file_name(spec_path.name)
        bag = DagBag(dag_folder=str(stub if stub.exists() else dags_folder))
        if bag.import_errors:
            return 1, None, {"dag_import_errors": bag.import_errors}
        dag = bag.dags.get(spec.dag_id)
        if dag is None:
            return 1, None, f"no DAG {spec.dag_id} in {dags_folder}"
        from kafka_ferry.cli.interrupt import RunInterrupts

        with (triggered_as(user),
              RunInterrupts(spec.dag_id, ["dry-run", str(spec_path), "--json"], str(spec_path))):  # cli.interrupt
            run = dag.test(run_conf=conf)
        results = task_results(run)
    return (0 if str(run.state) in ("success", "DagRunState.SUCCESS") else 1), run, results


def run_json(command: str, spec_path: Path, dags_folder: Path, user: str | None = None) -> int:
    if command == "check":
        return check_json(spec_path)
    if command == "status":
        return status_json(spec_path)
    return dry_run_json(spec_path, dags_folder, user)
