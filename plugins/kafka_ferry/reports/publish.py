"""Write a run's HTML page and the migration's overview row into the work dir, where the UI plugin reads them.

Layout under the work base (``kafka_ferry.storage.workdir``: a local directory or an object-storage URL):
``<migration>/runs/<run id>.html`` (one page per DAG run, rewritten as the run progresses), beside it
``<run id>.<section>.html`` (every row of a table the page summarizes: ``render.Details``), and
``<migration>/overview.json`` (the migration's row on the overview page), with ``<migration>/overview-backlog.svg``
(the row's backlog chart, drawn when the row's backlog history is written: the overview GET only reads it, so a
request costs file reads, never a matplotlib figure per migration). Files, not the state topic, so
the API server that serves them needs no Kafka connection (and, with the work dir in object storage, no shared
volume); the lag history comes from the state topic
(kind "batch") when the page is written.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafka_ferry.core.common.state_records import (
    GROUP_KIND,
    GROUP_PROMOTION_KIND,
    TOPIC_KIND,
    TOPIC_PROMOTION_KIND,
    StateSnapshot,
)
from kafka_ferry.core.cutover.authority import act_line
from kafka_ferry.core.cutover.staged_cutover import GROUP_STEPS, TOPIC_STEPS
from kafka_ferry.core.specs.patterns import MIGRATION_NAME
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.reports.render import (
    DETAIL_SECTIONS,
    Details,
    act_section,
    batch_page,
    evidence_section,
    overview_backlog_chart,
    promotion_page,
    rollback_page,
    staged_page,
)
from kafka_ferry.reports.unit_status import counts, unit_statuses, units_section
from kafka_ferry.storage.workdir import StoragePath, as_path, read_text, write_text

OVERVIEW_FILE = "overview.json"
OVERVIEW_CHART_FILE = "overview-backlog.svg"


# Kept as they are in a page's file name; every other character (the escape '~' included) becomes ~XX per
# UTF-8 byte, so the common run ids (scheduled__..., manual__...) keep readable names.
_KEPT = re.compile(r"[A-Za-z0-9._\-]")
# Past this, a name would near the file system's 255-byte limit: the run id's SHA-256 instead, marked by '~~'
# (the escaped form never holds '~~': an escape is always followed by a hex digit, so the forms cannot meet).
_MAX_ESCAPED = 200


def run_file_name(run_id: str) -> str:
    """A file-system-safe name that maps one-to-one to the run id (without extension).

    Why not "unsafe characters become '_'": ``manual__2026-11-25T07:00:00+00:00`` and
    ``manual__2026-11-25T07_00_00_00_00`` then share one file, and one run's page overwrites the other's.
    Escaping every character outside [A-Za-z0-9._-], the escape character included, is reversible; a leading
    '.' is escaped too, so no name is hidden, '.' or '..'.
    """
    escaped = "".join(c if _KEPT.fullmatch(c) and not (i == 0 and c == ".") else
                      "".join(f"~{b:02X}" for b in c.encode("utf-8")) for i, c in enumerate(run_id))
    if escaped and len(escaped) <= _MAX_ESCAPED:
        return escaped
    return "~~" + hashlib.sha256(run_id.encode("utf-8")).hexdigest()


def run_id_of_file_name(name: str) -> str | None:
    """The run id of an escaped file name (None for a hashed one): the inverse that makes the map one-to-one."""
    if name.startswith("~~"):
        return None
    out, i = bytearray(), 0
    while i < len(name):
        if name[i] == "~":
            out.append(int(name[i + 1:i + 3], 16))
            i += 3
        else:
            out += name[i].encode()
            i += 1
    return out.decode("utf-8")


def run_page_path(migration_dir: Path | StoragePath, run_id: str) -> StoragePath:
    """The page of one DAG run (``run_file_name`` makes the run id a safe, one-to-one file name)."""
    return as_path(migration_dir) / "runs" / (run_file_name(run_id) + ".html")


def detail_page_path(migration_dir: Path | StoragePath, run_id: str, section: str) -> StoragePath:
    """The detail page ``section`` of one run's page (``render.DETAIL_SECTIONS`` only: never a name from input)."""
    if section not in DETAIL_SECTIONS:
        raise ValueError(f"no detail page {section!r}; one of {', '.join(DETAIL_SECTIONS)}")
    return as_path(migration_dir) / "runs" / f"{run_file_name(run_id)}.{section}.html"


def _write_run_page(migration_dir: Path | StoragePath, run_id: str, html: str, details: Details) -> StoragePath:
    """The run's page, after its detail pages (a link on the page never points at a page not yet written)."""
    for section, detail in details.items():
        _write(detail_page_path(migration_dir, run_id, section), detail)
    return _write(run_page_path(migration_dir, run_id), html)


def publish_batch_run(spec: MigrationSpec, migration_dir: StoragePath, run_id: str, report: Mapping[str, Any],
                      groups: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]]) -> StoragePath:
    details = Details(run_id)
    path = _write_run_page(migration_dir, run_id, batch_page(report, groups, history, run_id, details), details)
    _update_overview(spec, migration_dir, run_id, last_batch=report.get("batch_id"),
                     last_batch_at_ms=report.get("finished_at_ms"), lag=report.get("lag_after_total"),
                     **overview_backlog(report))
    return path


OVERVIEW_BACKLOG_POINTS = 30  # runs the overview's backlog chart of a migration shows


def overview_backlog(report: Mapping[str, Any]) -> dict[str, Any]:
    """The migration's ETA sentence and backlog history for the overview, from a report's ``backlog`` section."""
    backlog = report.get("backlog")
    if not isinstance(backlog, Mapping):
        return {}
    return {"eta": backlog.get("sentence"), "backlog_history": list(backlog.get("history") or [])
            [-OVERVIEW_BACKLOG_POINTS:]}


def publish_promotion_run(spec: MigrationSpec, migration_dir: StoragePath, run_id: str, report: Mapping[str, Any],
                          history: Sequence[Mapping[str, Any]]) -> StoragePath:
    details = Details(run_id)
    path = _write_run_page(migration_dir, run_id, promotion_page(report, history, run_id, details), details)
    rec = report.get("reconciliation") or {}
    verdict = None if not rec else ("ok" if not rec.get("mismatched") else "mismatch: " + ", ".join(rec["mismatched"]))
    latest = history[-1] if history else {}
    _update_overview(spec, migration_dir, run_id, promoted=report.get("status") == "promoted",
                     rolled_back=False if report.get("status") == "promoted" else None,
                     reconciliation=verdict, last_batch=latest.get("batch_id"),
                     last_batch_at_ms=latest.get("finished_at_ms"), lag=latest.get("lag_after_total"),
                     **_last_act(report.get("act")))
    return path


def _last_act(act: Mapping[str, Any] | None) -> dict[str, Any]:
    """The overview row's ``last_act``: who did the migration's last cutover act (a line; the state has the rest)."""
    return {"last_act": act_line(act)} if act else {}


def publish_rollback_run(spec: MigrationSpec, migration_dir: StoragePath, run_id: str,
                         report: Mapping[str, Any], state: Mapping[Any, Mapping] | None = None) -> StoragePath:
    """A rollback run's page (or a rollback-plan run's); a finished rollback shows on the overview as rolled back.
    ``state`` (the state topic's snapshot after the run): the page and the overview also show promoted / rolled back
    per group and topic."""
    units = None if state is None else _units(state)
    details = Details(run_id)
    path = _write_run_page(migration_dir, run_id, rollback_page(
        report, run_id, [units_section(units, details)] if units else [], details), details)
    extra = {"staged": counts(units)} if units else {}
    extra.update(_last_act(report.get("act")))
    if report.get("status") == "rolled-back":
        _update_overview(spec, migration_dir, run_id, promoted=False, rolled_back=True, **extra)
    elif extra and not report.get("copy_back"):  # a unit's rollback (a plan changes nothing, not even the row)
        _update_overview(spec, migration_dir, run_id, **extra)
    return path


def _units(state: Mapping[Any, Mapping]) -> dict[str, Any]:
    """Every migrated group and mirrored topic, promoted or rolled back (``reports.unit_status``)."""
    return unit_statuses(state, GROUP_KIND.records(state), TOPIC_KIND.records(state))


def publish_staged_run(spec: MigrationSpec, migration_dir: StoragePath, run_id: str, state: StateSnapshot,
                       wanted_groups: Sequence[str], wanted_topics: Sequence[str], this_run: Sequence[str],
                       act: Mapping[str, Any] | None = None, evidence: Mapping[str, Any] | None = None
                       ) -> StoragePath:
    """A promote-groups or promote-topics run's page, from the state topic's promotion records; ``act``: who did it
    (state kind ``act``), shown on the page and the overview; ``evidence``: the run's bundle
    (``promotion.evidence``)."""
    groups, topics = GROUP_PROMOTION_KIND.records(state), TOPIC_PROMOTION_KIND.records(state)
    units = unit_statuses(state, wanted_groups, wanted_topics)
    details = Details(run_id)
    html = staged_page(spec.name, groups, topics, wanted_groups, wanted_topics, GROUP_STEPS, TOPIC_STEPS, this_run,
                       run_id, [units_section(units, details), *([act_section(act)] if act else []),
                                *([evidence_section(evidence, run_id)] if evidence else [])], details)
    path = _write_run_page(migration_dir, run_id, html, details)
    _update_overview(spec, migration_dir, run_id, staged=counts(units), **_last_act(act))
    return path


def overview_rows(work_base: Path | StoragePath) -> list[dict[str, Any]]:
    """The rows every migration under the work base wrote (unreadable files are skipped, not fatal)."""
    rows = []
    found: Iterable[StoragePath] = as_path(work_base).glob(f"*/{OVERVIEW_FILE}")
    for path in sorted(found, key=str):
        try:
            rows.append(json.loads(read_text(path)))
        except (OSError, ValueError):
            continue
    return rows


def overview_chart(work_base: Path | StoragePath, row: Mapping[str, Any]) -> str | None:
    """The backlog chart stored beside a row (``OVERVIEW_CHART_FILE``), or None when none was drawn yet (a row
    written before charts were stored, or one without backlog history). Reads one file: no drawing."""
    name = row.get("migration")
    if not isinstance(name, str) or not MIGRATION_NAME.fullmatch(name):
        return None  # the row's text names the file: only a migration name, never a path
    try:
        svg = read_text(as_path(work_base) / name / OVERVIEW_CHART_FILE)
    except (OSError, ValueError):
        return None
    return svg if svg.startswith("<svg") else None


def _update_overview(spec: MigrationSpec, migration_dir: StoragePath, run_id: str, **fields: Any) -> None:
    path = as_path(migration_dir) / OVERVIEW_FILE
    try:
        row = json.loads(read_text(path))
    except (OSError, ValueError):
        row = {"promoted": False, "reconciliation": None}
    row.update({k: v for k, v in fields.items() if v is not None or k not in row})
    row.update(migration=spec.name, tenant=spec.tenant, dag_id=spec.dag_id, last_run_id=run_id,
               updated_at_ms=int(time.time() * 1000))
    if fields.get("backlog_history"):  # drawn here, once per run that brings new history; the GET only reads it
        _write(as_path(migration_dir) / OVERVIEW_CHART_FILE, overview_backlog_chart(spec.name, row["backlog_history"]))
    _write(path, json.dumps(row, indent=1, sort_keys=True))


def _write(path: StoragePath, text: str) -> StoragePath:
    return write_text(path, text)


def publish_live_batch(migration_dir: StoragePath, run_id: str, view: Mapping[str, Any]) -> StoragePath:
    """The run's page while its batch runs (``render.live_batch_page``); the batch's report replaces it."""
    from kafka_ferry.reports.render import live_batch_page

    details = Details(run_id)
    return _write_run_page(migration_dir, run_id, live_batch_page(view, run_id, details), details)
