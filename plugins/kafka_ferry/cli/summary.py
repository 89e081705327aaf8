"""What a DAG run did, in a few lines: the tasks' states and results (XComs) and the promotion report."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any


def task_results(run) -> dict[str, Any]:  # JSON values as the tasks returned them
    """The run's XCom return values by task id (from the metadata DB, where ``dag.test`` put them)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, key="return_value")).all()
        # each row is an XComModel: Airflow annotates get_many as Select[tuple[XComModel]] (SQLAlchemy 2.0's form),
        # which SQLAlchemy 2.1's scalars() reads as rows of tuples (a third-party annotation gap)
        return {row.task_id: XComModel.deserialize_value(row) for row in rows}  # type: ignore[attr-defined]


def shown_path(path: str | Path) -> str:
    """A local path as a person types it: relative to the current directory when below it, quoted for a shell
    when it needs quoting; a URL (a work dir on an object store) as it is."""
    text = str(path)
    if "://" in text:
        return text
    try:
        text = str(Path(text).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        pass
    return shlex.quote(text)


def schema_ids(schemas: dict[str, Any]) -> str:
    """``; ids 1 -> 2, ...`` of a migration that mapped ids; a dry run or a run with nothing new maps none."""
    id_map = schemas.get("id_map") or {}
    if id_map:
        return "; ids " + ", ".join(f"{s} -> {d}" for s, d in id_map.items())
    if schemas.get("dry_run"):
        diff = schemas.get("diff") or []
        return f"; dry run: {len(diff)} change(s) planned, no id assigned yet" + "".join(
            f"\n    {line}" for line in diff[:20]) + (f"\n    ... and {len(diff) - 20} more" if len(diff) > 20 else "")
    return "; no ids mapped"


def dry_run_lines(plan: dict[str, Any]) -> list[str]:
    """A dry run's first batch, range by range, and the backlog's estimate (plan_copy's XCom), as
    docs/first-migration.md promises; nothing for a real run (its copy report says what it copied)."""
    if not plan.get("dry_run"):
        return []
    from kafka_ferry.copy.backlog import estimate_lines

    ranges = plan.get("ranges") or []
    lines = [f"first batch (dry run, nothing copied): {plan.get('partitions', len(ranges))} partition(s), up to "
             f"{plan.get('offsets', 0)} offset(s)" + ("" if ranges else "; nothing to copy")]
    lines += [f"  {r}" for r in ranges]
    if plan.get("estimate"):
        lines += [f"estimate: {line}" for line in estimate_lines(plan["estimate"])]
    return lines


def coupling_lines(units: dict | None) -> list[str]:
    """The pre-flight's coupled units (``promotion.units``): what the transaction log said, then each unit."""
    if not units:
        return []
    lines = [f"coupling: transaction log {units.get('transaction_log')}"]
    for unit in units.get("units") or []:
        members = [f"topic {t}" for t in unit["topics"]] + [f"group {g}" for g in unit["groups"]]
        lines.append(f"coupled unit {unit['name']} ({unit['reason']}): {', '.join(members)}")
    return lines + [f"coupling: {note}" for note in units.get("notes") or []]


def print_summary(run, migration: str) -> None:
    from kafka_ferry.copy.plan import planned_files, work_dir
    from kafka_ferry.copy.report import report_lines
    from kafka_ferry.storage.workdir import read_text

    results = task_results(run)
    states = {ti.task_id: str(ti.state).rsplit(".", 1)[-1].lower() for ti in run.get_task_instances()}
    print(f"\nDAG run {run.run_id}: {str(run.state).rsplit('.', 1)[-1].lower()}")
    print("  tasks: " + ", ".join(f"{t}={s}" for t, s in sorted(states.items())))
    diff = results.get("preflight") or {}
    for line in (diff.get("topics") or {}).get("changes", []):
        print(f"  pre-flight: {line}")
    for group, topics in ((diff.get("groups") or {}).get("migrated") or {}).items():
        print(f"  pre-flight: migrate group {group} ({', '.join(topics)})")
    for line in diff.get("applications") or []:
        print(f"  pre-flight: unit {line}")
    for line in coupling_lines(diff.get("coupled_units")):
        print(f"  pre-flight: {line}")
    schemas = results.get("migrate_schemas") or {}
    if schemas:
        print(f"  schemas ({schemas['mode']}): {len(schemas['subjects'])} subject(s), {schemas['registered']} "
              f"version(s) registered" + schema_ids(schemas))
    for line in acl_lines(results.get("migrate_acls")):
        print(f"  {line}")
    plan = results.get("plan_copy") or {}
    for line in dry_run_lines(plan):
        print(f"  {line}")
    # derived from the migration and the batch id, never a path from XCom (copy.plan.planned_files)
    report_path = planned_files(migration, plan)[1] if plan.get("report_path") else None
    if report_path and report_path.exists():
        for line in report_lines(json.loads(read_text(report_path))):
            print(f"  copy: {line}")
    check = results.get("decode_check") or {}
    if "topics" in check and not check["topics"]:
        print("  decode check: no newly copied records to decode")
    for topic, tally in (check.get("topics") or {}).items():
        print(f"  decode check: {topic}: {tally['records']} records, {tally['values_decoded']} values decoded "
              f"against the destination registry, {tally['failed']} failed")
    if check.get("failed"):
        print(f"  decode check: FAILED: {check['failures'][:3]}")
    translation = results.get("translate_offsets") or {}
    for key, value in translation.items():
        if key == "offset_map" and isinstance(value, dict):
            value = ", ".join(f"{form} {shown_path(path)}" for form, path in value.items())
        elif key == "run_report" and value:
            value = shown_path(value)
        if key not in ("decisions", "commits"):
            print(f"  translation: {key} = {value}")
    if "promote_reconcile_mark" in results:
        print_promotion(work_dir(migration) / "promotion-report.json")
    for task in ("promote_groups", "promote_topics"):
        for line in staged_lines(results.get(task)):
            print(f"  {task.replace('_', '-')}: {line}")
    for line in rollback_lines(results.get("rollback")):
        print(f"  {line}")


def acl_lines(result: dict | None) -> list[str]:
    """The ACL migration's result (``operators.acls``, ``acls.migrate``): the counts, then the diff (a dry run: what
    it would create; a run: what it created, and every refusal)."""
    if not result:
        return []
    verb = "would create" if result.get("dry_run") else "created"
    counts = ", ".join(f"{k} {result[k]}" for k in ("present", "refused", "skipped") if k in result)
    return ([f"ACLs: {verb} {result.get('create', 0)}" + (f" ({counts})" if counts else "")]
            + [f"ACLs: {line}" for line in result.get("diff") or [] if not line.startswith("=")])  # present: counted


def staged_lines(result: dict | None) -> list[str]:
    """A staged promotion's result (``operators.staged_promotion``): each unit and the run's page."""
    if not result:
        return []
    lines = [f"{unit} promoted by run {r.get('run_id')}" for unit, r in sorted(result.items())
             if isinstance(r, dict) and "run_id" in r]
    return lines + ([f"run report: {result['run_report']}"] if result.get("run_report") else [])


def rollback_lines(result: dict | None) -> list[str]:
    """The rollback task's return value in readable lines: the plan (``rollback-plan``: what would be copied back,
    where each group would resume on the source, what would be refused, the ACLs it needs) or what the rollback
    did. The same as the task log's, without the rest of the log."""
    if not result:
        return []
    if "copy_back" not in result:  # a rollback that ran
        lines = [f"rollback: {result.get('status')}"]
        for step, done in (result.get("this_run") or {}).items():
            lines.append(f"  step {step}: {done.get('status')}"
                         + (f" in {done['duration_s']} s" if done.get("duration_s") is not None else ""))
        for unit in ("topics", "groups"):
            if isinstance(result.get(unit), dict) and result[unit]:
                lines.append(f"  {unit} rolled back: {', '.join(sorted(result[unit]))}")
        if result.get("report_path"):
            lines.append(f"  report: {result['report_path']}")
        return lines
    lines = [f"rollback plan: {result.get('records', 0)} record(s) to copy back to the source"
             + (f" ({result['note']})" if result.get("note") else "")]
    for r in result["copy_back"]:
        lines.append(f"  copy back {r['destination_topic']}-{r['partition']} [{r['start']}, {r['end']}): "
                     f"{r['records']} record(s); {r.get('reason', '')}".rstrip("; "))
    for group, rows in sorted((result.get("groups") or {}).items()):
        for r in rows:
            lines.append(f"  group {group} resumes on the source at {r['source_topic']}-{r['partition']}@"
                         f"{r['source_offset']} (destination {r['destination_topic']}-{r['partition']}@"
                         f"{r['destination_offset']}; {r['method']})")
    for group in result.get("rolled_back_already", []):
        lines.append(f"  group {group}: rolled back already, nothing to do")
    for row in (result.get("schema_ids") or {}).get("unmapped_ids", []):
        lines.append(f"  REFUSED: destination schema id {row['schema_id']} ({row['subject_versions']}): "
                     f"{row['records']} record(s) the forward map never knew")
    acls = result.get("acls") or {}
    lines += [f"  needs {line}" for line in acls.get("needed", [])]
    lines += [f"  missing now (grant before the rollback): {line}" for line in acls.get("missing", [])]
    return lines


def print_promotion(path: Path | Any) -> None:  # Any: a work dir object (storage.workdir)
    from kafka_ferry.storage.workdir import read_text

    report = json.loads(read_text(path))
    steps = ", ".join(f"{name} {step.get('duration_s', '?')} s" for name, step in report["steps"].items())
    total = report.get("total_s")
    print(f"  promotion: {report['status']} ({steps}" + (f"; {total} s in all)" if total is not None else ")"))
    rec = report["reconciliation"]
    print(f"  reconciliation: {'ok' if rec['ok'] else 'MISMATCH'}: {rec['partitions_checked']} partitions, "
          f"{rec['records_checked']} records, counts and digests equal; mismatched: {rec['mismatched']}")
    for g in report["groups"][:6]:
        print(f"  group {g['group']} {g['source_topic']}-{g['partition']}: source offset {g['upstream_offset']} -> "
              f"destination offset {g['downstream_offset']} ({g['method']}), lag {g['downstream_lag']}")
    print(f"  ... {len(report['groups'])} group partitions in {path}")
