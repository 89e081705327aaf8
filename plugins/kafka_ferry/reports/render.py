"""HTML pages from the reports copy and promotion already write (batch report, offset decisions, promotion report).

Pure: dicts in, one self-contained HTML string out (inline CSS, the chart as inline SVG; no script, no
asset from the internet). Every value from a cluster or a spec is escaped.

Readable at a real tenant's size (200 topics, 2,000 partitions, 200 groups): a table of more than ``SUMMARY_AT``
rows is summarized on the run's page (its count, its totals, the ``WORST_N`` rows that need a look first), and its
every row goes to a detail page of its own, one click away (``Details``: ``publish`` writes each beside the run's
page, the UI plugin serves it with the run page's own access check). A page then stays a few hundred kB at most
whatever the tenant's size, and the detail is never lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import quote

from kafka_ferry.core.offsets.offset_translation import EXACT_METHODS
from kafka_ferry.reports.chart import backlog_chart_svg, lag_chart_svg

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#1d2433}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:20px 0 6px}
table{border-collapse:collapse;margin:4px 0 12px}th,td{border:1px solid #d5d9e0;padding:3px 8px;text-align:right}
th{background:#f2f4f7}td.l,th.l{text-align:left}.muted{color:#667085}
.ok{color:#067647;font-weight:600}.bad{color:#b42318;font-weight:600}.warn{color:#b54708;font-weight:600}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #d5d9e0;border-radius:6px;padding:6px 12px}
.card b{display:block;font-size:18px}
"""


def _time(ms: int | None) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ms else "—"


def _config_changes(changes: Any) -> Any:
    """`{config: value}` as a person reads it; None means the topic's override was removed (broker default)."""
    if not isinstance(changes, Mapping):
        return changes
    return "; ".join(f"{k} = {v}" if v is not None else f"{k}: broker default" for k, v in sorted(changes.items()))


def _cell(value: Any) -> str:
    return "—" if value is None else escape(str(value))


def table(columns: Sequence[tuple[str, str]], rows: Iterable[Mapping[str, Any]], left: Iterable[str] = ()) -> str:
    """An HTML table of ``rows`` with ``columns`` as (key, heading); keys in ``left`` are left-aligned."""
    left = set(left)
    head = "".join(f"<th{_align(k, left)}>{escape(h)}</th>" for k, h in columns)
    body = "".join("<tr>" + "".join(f"<td{_align(k, left)}>{_cell(r.get(k))}</td>" for k, _ in columns) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body or '<tr><td class=l colspan=99>none</td></tr>'}</table>"


def _align(key: str, left: set[str]) -> str:
    return ' class="l"' if key in left else ""


SUMMARY_AT = 50  # rows a table shows in full on a run's page; above, it is summarized (module docstring)
WORST_N = 20  # rows of a summarized table shown on the page: those that need a look first
DETAIL_SECTIONS = ("partitions", "groups", "decode", "reconciliation", "timestamps", "copy-back", "resume",
                   "staged-groups", "staged-topics", "units")


class Details(dict):
    """The detail pages of one run page: section name -> HTML (``publish`` writes them; ``href`` links them).

    :param run_id: the run whose page links them (the link is relative to that page's URL).
    """

    def __init__(self, run_id: str = "") -> None:
        super().__init__()
        self.run_id = run_id

    def href(self, section: str) -> str:
        # the run page's URL ends with the quoted run id: a relative link to "<run id>/<section>" stays under it
        return f"{quote(self.run_id, safe='')}/{section}"


def summarized(section: str, what: str, columns: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]],
               left: Iterable[str] = (), worst: Any = None, worst_says: str = "", totals: Iterable[str] = (),
               details: Details | None = None, title: str = "") -> str:
    """``table``, or above ``SUMMARY_AT`` rows: a line with the count and the totals of the ``totals`` columns,
    the ``WORST_N`` rows first by ``worst`` (a sort key; ``worst_says`` names the order), and a link to the
    detail page with every row (put in ``details`` under ``section``).

    :param what: what a row is, plural ("partitions").
    """
    assert section in DETAIL_SECTIONS, section
    left = list(left)
    if len(rows) <= SUMMARY_AT:
        return table(columns, rows, left=left)
    sums = []
    for key in totals:
        values = [v for v in (r.get(key) for r in rows) if isinstance(v, int | float)]
        heading = dict(columns).get(key, key)
        sums.append(f"{escape(heading)} {sum(values):,}" if values else "")
    shown = sorted(rows, key=worst)[:WORST_N] if worst else list(rows)[:WORST_N]
    full = table(columns, rows, left=left)
    link = ""
    if details is not None:
        details[section] = page(f"{title or what}: all {len(rows):,} {what}",
                                f"<h1>{escape(title or what)}: all {len(rows):,} {escape(what)}</h1>{full}")
        link = f' <a href="{escape(details.href(section))}">All {len(rows):,} {escape(what)}</a>'
    head = (f'<p class="summary">{len(rows):,} {escape(what)}' + "".join(f"; {t}" for t in sums if t)
            + f"; the {len(shown)} shown {escape(worst_says or 'first')}.{link}</p>")
    return head + table(columns, shown, left=left)


def page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


def _cards(items: Sequence[tuple[str, Any]]) -> str:
    return '<div class="cards">' + "".join(f'<div class="card"><b>{_cell(v)}</b>{escape(k)}</div>'
                                           for k, v in items) + "</div>"


PARTITION_COLUMNS = (("source_topic", "source topic"), ("partition", "partition"),
                     ("destination_topic", "destination topic"), ("start_offset", "from"),
                     ("next_upstream_offset", "to"), ("records_copied", "records"), ("bytes_copied", "bytes"),
                     ("syncs_written", "syncs"), ("lag_before", "lag before"), ("lag_after", "lag after"),
                     ("duration_s", "seconds"))
GROUP_COLUMNS = (("group", "group"), ("source_topic", "source topic"), ("partition", "partition"),
                 ("upstream_offset", "source offset"), ("destination_topic", "destination topic"),
                 ("downstream_offset", "destination offset"), ("method", "method"), ("reason", "why"))
GAP_COLUMNS = (("topic", "topic"), ("partition", "partition"), ("lost_start", "lost from"),
               ("lost_end", "lost to"), ("lost_count", "offsets lost"))


DECODE_COLUMNS = (("topic", "destination topic"), ("serialized", "registry-serialized fields"),
                  ("records", "records"), ("values_decoded", "values decoded"),
                  ("keys_decoded", "keys decoded"), ("plain", "keys/values without schema"), ("failed", "failed"),
                  ("types", "schema types"))
DECODE_FAILURE_COLUMNS = (("topic", "topic"), ("partition", "partition"), ("offset", "offset"), ("field", "field"),
                          ("schema_id", "schema id"), ("reason", "why"))


def _decode_section(check: Mapping[str, Any], details: Details | None = None) -> str:
    """The decode check of the batch's records on the destination: per topic, then the first failures."""
    failed = check.get("failed", 0)
    rows = [{"topic": t, **tally, "types": ", ".join(f"{k} {v}" for k, v in sorted(tally["schema_types"].items()))}
            for t, tally in check.get("topics", {}).items()]
    verdict = (f'<span class="bad">{failed} record(s) do not decode</span>' if failed else
               '<span class="ok">every record decodes</span>' if rows else "no new records to check")
    checks = "; ".join(f"{k}: {v}" for k, v in sorted(check.get("checks", {}).items()))
    out = [f"<h2>Schemas: copied records decoded on the destination: {verdict}</h2>",
           f'<p class="muted">against the destination registry; {escape(checks)}</p>',
           summarized("decode", "topics", DECODE_COLUMNS, rows, left=("topic", "serialized", "types"),
                      worst=lambda r: (-(r.get("failed") or 0), r["topic"]), worst_says="most failures first",
                      totals=("records", "failed"), details=details, title="Decode check")]
    if check.get("failures"):
        out += ['<h3 class="warn">First records that do not decode</h3>',
                table(DECODE_FAILURE_COLUMNS, check["failures"], left=("topic", "field", "reason"))]
    return "".join(out)


def _groups_section(groups: Sequence[Mapping[str, Any]], details: Details | None = None) -> str:
    """Per group and partition, the translated offsets; at a real tenant's size, the groups' count, the methods'
    counts, and the partitions whose method is not an exact one first."""
    rows = sorted(groups, key=lambda g: (g["group"], g["source_topic"], g["partition"]))
    methods: dict[str, int] = {}
    for g in rows:
        methods[str(g.get("method"))] = methods.get(str(g.get("method")), 0) + 1
    head = "<h2>Consumer groups: source → destination offsets</h2>"
    if len(rows) > SUMMARY_AT:
        head += (f'<p class="muted">{len({g["group"] for g in rows}):,} group(s); methods: '
                 + escape(", ".join(f"{m} {n:,}" for m, n in sorted(methods.items()))) + "</p>")
    return head + summarized(
        "groups", "group partitions", GROUP_COLUMNS, rows,
        left=("group", "source_topic", "destination_topic", "method", "reason"),
        worst=lambda g: (g.get("method") in EXACT_METHODS, g["group"], g["source_topic"],
                         g["partition"]),
        worst_says="not exact first, then by group", details=details, title="Consumer groups")


def batch_page(report: Mapping[str, Any], groups: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]],
               run_id: str = "", details: Details | None = None) -> str:
    """A catch-up run: the batch's totals and partitions, gaps, translated groups, the lag chart (big tables
    summarized, their rows in ``details``: module docstring)."""
    status = report.get("status", "?")
    title = f"{report['migration']}: batch {report['batch_id']}"
    body = [f"<h1>{escape(title)}</h1>",
            f'<p class="muted">run {escape(run_id) or "—"} · {_time(report.get("started_at_ms"))} → '
            f'{_time(report.get("finished_at_ms"))} · <span class="{"ok" if status == "succeeded" else "bad"}">'
            f"{escape(str(status))}</span></p>",
            *([f'<h2 class="bad">The run failed</h2><p class="bad">{escape(str(report["failure"]))}</p>']
              if report.get("failure") else []),
            _cards([("records copied", report.get("records_copied")), ("bytes copied", report.get("bytes_copied")),
                    ("lag before", report.get("lag_before_total")), ("lag after", report.get("lag_after_total")),
                    ("offset syncs", report.get("syncs_written")), ("seconds", report.get("duration_s")),
                    ("resumed", report.get("records_resumed")), ("gaps", len(report.get("gaps", [])))]),
            *([backlog_section(report["backlog"])] if report.get("backlog") else []),
            "<h2>Lag over the migration's batches</h2>", lag_chart_svg(history),
            "<h2>Partitions of this batch</h2>",
            summarized("partitions", "partitions", PARTITION_COLUMNS, report.get("partitions", []),
                       left=("source_topic", "destination_topic"),
                       worst=lambda r: (-(r.get("lag_after") or 0), -(r.get("records_copied") or 0),
                                        str(r.get("source_topic")), r.get("partition") or 0),
                       worst_says="by lag after the batch, then records copied",
                       totals=("records_copied", "bytes_copied", "syncs_written"), details=details,
                       title="Partitions of this batch")]
    if report.get("gaps"):
        body += ['<h2 class="warn">Retention gaps (accepted by the spec)</h2>', table(GAP_COLUMNS, report["gaps"],
                                                                                      left=("topic",))]
    if report.get("decode_check"):
        body.append(_decode_section(report["decode_check"], details))
    body.append(_groups_section(groups, details))
    return page(title, "".join(body))


RECONCILE_COLUMNS = (("source_topic", "source topic"), ("partition", "partition"), ("source_count", "source records"),
                     ("destination_count", "destination records"), ("verdict", "verdict"))


def promotion_page(report: Mapping[str, Any], history: Sequence[Mapping[str, Any]], run_id: str = "",
                   details: Details | None = None) -> str:
    """A promotion run: status, steps, reconciliation per partition, per-group offsets, timestamps, lag chart."""
    title = f"{report['migration']}: promotion"
    rec = report.get("reconciliation") or {}
    rows = [{**p, "verdict": "ok" if p.get("matches") else "MISMATCH"} for p in rec.get("partitions", [])]
    verdict = ("not run yet" if not rec else "all partitions match" if not rec.get("mismatched")
               else "MISMATCH: " + ", ".join(rec["mismatched"]))
    # in the order they ran (the report orders them by finish time), each with its own seconds
    steps = [{"step": name, "finished": _time(step.get("finished_at_ms") or step.get("written_at_ms")),
              "seconds": step.get("duration_s")} for name, step in report.get("steps", {}).items()]
    body = [f"<h1>{escape(title)}</h1>",
            f'<p class="muted">run {escape(run_id) or "—"} · generated {_time(report.get("generated_at_ms"))}</p>',
            _cards([("status", report.get("status")), ("groups", len({g["group"] for g in report.get("groups", [])})),
                    ("partitions reconciled", len(rows)),
                    ("seconds, all steps", report.get("total_s", report.get("duration_s")))]),
            f'<h2>Reconciliation: <span class="{"ok" if rec and not rec.get("mismatched") else "bad"}">'
            f"{escape(verdict)}</span></h2>",
            summarized("reconciliation", "partitions", RECONCILE_COLUMNS, rows, left=("source_topic", "verdict"),
                       worst=lambda r: (r["verdict"] == "ok", str(r.get("source_topic")), r.get("partition") or 0),
                       worst_says="mismatches first", totals=("source_count", "destination_count"),
                       details=details, title="Reconciliation"),
            _groups_section(report.get("groups", []), details),
            "<h2>Promotion steps, in the order they ran</h2>",
            table((("step", "step"), ("finished", "finished"), ("seconds", "seconds")), steps,
                  left=("step", "finished"))]
    if report.get("timestamps"):
        ts = [{"topic": t, **p, "at_promotion": _config_changes(p.get("at_promotion")) or "unchanged"}
              for t, p in report["timestamps"].items()]
        body += ["<h2>Timestamp types</h2>", summarized(
            "timestamps", "topics", (("topic", "source topic"), ("destination_topic", "mirror"), ("status", "status"),
                                     ("at_promotion", "from promotion on")),
            ts, left=("topic", "destination_topic", "status", "at_promotion"),
            worst=lambda r: (r["at_promotion"] == "unchanged", str(r["topic"])), worst_says="changed first",
            details=details, title="Timestamp types")]
    if report.get("decode_totals"):
        failed = sum(t["failed"] for t in report["decode_totals"].values())
        verdict = (f'<span class="bad">{failed} record(s) did not decode</span>' if failed else
                   '<span class="ok">every checked record decoded</span>')
        body += [f"<h2>Schemas: the decode check over the whole migration: {verdict}</h2>",
                 summarized("decode", "topics", (("topic", "destination topic"), ("records", "records checked"),
                                                 ("decoded", "keys/values decoded"),
                                                 ("plain", "keys/values without schema"),
                                                 ("failed", "records failed")),
                            [{"topic": t, **v} for t, v in report["decode_totals"].items()], left=("topic",),
                            worst=lambda r: (-(r.get("failed") or 0), r["topic"]), worst_says="most failures first",
                            totals=("records", "failed"), details=details, title="Decode check")]
    if report.get("rollback_plan"):
        body.append(rollback_plan_section(report["rollback_plan"], details))
    if report.get("act"):
        body.append(act_section(report["act"]))
    if report.get("evidence"):
        body.append(evidence_section(report["evidence"], run_id))
    body += ["<h2>Lag over the migration's batches</h2>", lag_chart_svg(history)]
    return page(title, "".join(body))


STAGED_COLUMNS = (("name", "name"), ("status", "status"), ("steps", "steps done"), ("started", "started"),
                  ("promoted", "promoted"), ("run_id", "by run"), ("detail", "detail"))


def _staged_rows(units: Mapping[str, Mapping[str, Any]], wanted: Iterable[str], steps: Sequence[str]) -> list[dict]:
    """One row per unit of the migration: promoted, in progress (which steps), or not started."""
    rows = []
    for name in sorted(set(wanted) | set(units)):
        unit = units.get(name)
        if unit is None:
            rows.append({"name": name, "status": "not started", "steps": "", "started": "", "promoted": "",
                         "run_id": "", "detail": ""})
            continue
        done = list(unit.get("steps_done") or [])
        detail = unit.get("detail") or {}
        notes = []
        if isinstance(detail.get("reconciled"), Mapping):
            notes.append(f"reconciled {detail['reconciled'].get('partitions')} partition(s)")
        if isinstance(detail.get("final_copy"), Mapping):
            notes.append(f"final copy in {detail['final_copy'].get('batches')} batch(es)")
        if isinstance(detail.get("promoted"), Mapping) and detail["promoted"].get("fence_lifted"):
            notes.append("fence lifted")
        rows.append({"name": name, "status": "promoted" if unit.get("promoted_at_ms") else
                     f"in progress ({len(done)}/{len(steps)})", "steps": ", ".join(done),
                     "started": _time(unit.get("started_at_ms")), "promoted": _time(unit.get("promoted_at_ms")),
                     "run_id": unit.get("run_id", ""), "detail": "; ".join(notes)})
    return rows


def staged_page(migration: str, groups: Mapping[str, Mapping[str, Any]], topics: Mapping[str, Mapping[str, Any]],
                wanted_groups: Iterable[str], wanted_topics: Iterable[str], group_steps: Sequence[str],
                topic_steps: Sequence[str], this_run: Iterable[str] = (), run_id: str = "",
                sections: Sequence[str] = (), details: Details | None = None) -> str:
    """A staged-cutover run: where every group and topic of the migration stands, and for the units this run
    promoted, the offsets committed for them (the group-by-group twin of the promotion page). ``sections``: more
    HTML at the end (``reports.unit_status``: promoted / rolled back per unit)."""
    title = f"{migration}: staged cutover"
    group_rows = _staged_rows(groups, wanted_groups, group_steps)
    topic_rows = _staged_rows(topics, wanted_topics, topic_steps)
    promoted = lambda rows: sum(r["status"] == "promoted" for r in rows)  # noqa: E731
    offsets = [d for name in sorted(set(this_run)) for d in
               ((groups.get(name) or {}).get("detail", {}).get("translated") or {}).get("decisions", [])]
    body = [f"<h1>{escape(title)}</h1>",
            f'<p class="muted">run {escape(run_id) or "—"} · this run: {escape(", ".join(sorted(this_run))) or "—"}'
            "</p>",
            _cards([("groups promoted", f"{promoted(group_rows)} / {len(group_rows)}"),
                    ("topics promoted", f"{promoted(topic_rows)} / {len(topic_rows)}")]),
            "<h2>Consumer groups</h2>", _staged_table("staged-groups", "groups", group_rows, details),
            "<h2>Topics</h2>", _staged_table("staged-topics", "topics", topic_rows, details)]
    if offsets:
        body.append(_groups_section(offsets, details))
    return page(title, "".join(body + list(sections)))


def _staged_table(section: str, what: str, rows: Sequence[Mapping[str, Any]], details: Details | None) -> str:
    return summarized(section, what, STAGED_COLUMNS, rows, left=[c for c, _ in STAGED_COLUMNS],
                      worst=lambda r: ({"promoted": 2, "not started": 1}.get(r["status"], 0), r["name"]),
                      worst_says="in progress first, then not started", details=details, title=f"Staged {what}")


OVERVIEW_COLUMNS = (("migration", "migration"), ("tenant", "tenant"), ("last_batch", "last batch"),
                    ("last_batch_at", "finished"), ("lag", "lag after the last batch"), ("promoted", "promoted"),
                    ("staged", "staged cutover"),
                    ("reconciliation", "last reconciliation"), ("report", "last run"))


ACT_COLUMNS = (("action", "act"), ("user", "triggered by"), ("allowed_by", "allowed as"),
               ("confirmation", "confirmation typed"), ("run_id", "run"), ("started", "started"),
               ("finished", "finished"), ("status", "status"))


def act_section(act: Mapping[str, Any]) -> str:
    """Who did this cutover act (state kind ``act``, ``core.cutover.authority``): the run's triggering user, why they
    may, what they typed, the run and when."""
    row = {**act, "started": _time(act.get("started_at_ms")), "finished": _time(act.get("finished_at_ms"))}
    return "<h2>Who did it</h2>" + table(ACT_COLUMNS, [row], left=[c for c, _ in ACT_COLUMNS])


def evidence_section(evidence: Mapping[str, Any], run_id: str) -> str:
    """The run's evidence bundle (``promotion.evidence``): where it is, whether it is signed and by which key, its
    status when written, and a link to the page that verifies it again now."""
    row = {"path": evidence.get("path"), "signed": f"yes, key {evidence.get('fingerprint')}" if evidence.get("signed")
           else "no (unsigned: the spec names no evidence.signing_connection_id)",
           "status": evidence.get("status"), "checked": _time(evidence.get("checked_at_ms"))}
    link = f'<p><a href="{quote(run_id, safe="")}/evidence">verify the bundle now</a></p>'
    return ("<h2>Evidence bundle</h2>" + table((("path", "bundle"), ("signed", "signed"), ("status", "status"),
                                                 ("checked", "checked at")), [row],
                                                left=("path", "signed", "status", "checked")) + link)


def evidence_page(run_id: str, bundles: Sequence[tuple[str, Sequence[str], Mapping[str, Any] | None]]) -> str:
    """Each bundle of a run, verified as the page is asked for: its verdict lines and its manifest."""
    body = [f"<h1>Evidence of run {escape(run_id)}</h1>"]
    if not bundles:
        body.append("<p>No evidence bundle for this run: bundles are written after a promotion and a rollback.</p>")
    for path, lines, manifest in bundles:
        ok = lines and lines[-1] == "verified"
        body.append(f"<h2>{escape(path)}</h2>"
                    + f'<p class="{"ok" if ok else "bad"}">{escape(lines[-1] if lines else "")}</p>'
                    + "<pre>" + escape("\n".join(lines)) + "</pre>"
                    + ("<h3>manifest.json</h3><pre>" + escape(json.dumps(manifest, indent=1)) + "</pre>"
                       if manifest else ""))
    return page(f"evidence {run_id}", "".join(body))


def overview_page(rows: Sequence[Mapping[str, Any]], report_href: str = "") -> str:
    """Every migration on one page: the one a platform team opens in a migration week."""
    cells = []
    for r in sorted(rows, key=lambda r: (r.get("tenant") or "", r["migration"])):
        link = ""
        if r.get("dag_id") and r.get("last_run_id") and report_href:
            href = report_href.format(dag_id=quote(r["dag_id"], safe=""), run_id=quote(r["last_run_id"], safe=""))
            link = f'<a href="{href}">{escape(r["last_run_id"])}</a>'
        cells.append("<tr>" + "".join([
            f'<td class="l">{_cell(r["migration"])}</td>', f'<td class="l">{_cell(r.get("tenant"))}</td>',
            f'<td class="l">{_cell(r.get("last_batch"))}</td>',
            f'<td class="l">{_time(r.get("last_batch_at_ms"))}</td>',
            # the lag the last batch left, not the lag now (producers kept writing): said with its time
            f"<td>{_cell(r.get('lag'))}"
            + (f' <span class="muted">at {_time(r.get("last_batch_at_ms"))}</span>' if r.get("last_batch_at_ms")
               and r.get("lag") is not None else "") + "</td>",
            f'<td class="l {"ok" if r.get("promoted") else ""}">'
            f'{"yes" if r.get("promoted") else "rolled back" if r.get("rolled_back") else "no"}'
            + (f'<br><span class="muted">{_cell(r["last_act"])}</span>' if r.get("last_act") else "") + "</td>",
            f'<td class="l">{_cell(r.get("staged"))}</td>',
            f'<td class="l">{_cell(r.get("reconciliation"))}</td>', f'<td class="l">{link or "—"}</td>']) + "</tr>")
    head = "".join(f'<th class="l">{escape(h)}</th>' for _, h in OVERVIEW_COLUMNS)
    empty = '<tr><td class="l" colspan="9">no migration has reported yet</td></tr>'
    return page("kafka-ferry migrations", f"<h1>kafka-ferry migrations</h1><table><tr>{head}</tr>"
                                          f"{''.join(cells) or empty}</table>"
                                          f"{overview_backlog_section(rows, report_href)}")


def _mb(value: Any) -> str | None:
    return None if value is None else f"{value / 1e6:,.1f} MB"


def _eta_list(etas: Sequence[Mapping[str, Any]]) -> str:
    """Each ETA's sentence, and why, as a person reads it."""
    items = "".join(f'<li><b>{escape(str(e.get("sentence")))}</b> <span class="muted">({escape(str(e.get("reason")))})'
                    "</span></li>" for e in etas)
    return f"<ul>{items}</ul>" if items else '<p class="muted">no ETA</p>'


def backlog_section(backlog: Mapping[str, Any]) -> str:
    """A run's backlog before and after, the measured rate, the ETAs with their reasons, the backlog chart."""
    rate = backlog.get("copy_records_per_s")
    return "".join([
        "<h2>Backlog and ETA</h2>",
        _eta_list(backlog.get("etas") or []),
        _cards([("backlog before (offsets)", backlog.get("backlog_before")),
                ("backlog after (offsets)", backlog.get("backlog_after")),
                ("backlog after, estimated", _mb(backlog.get("backlog_bytes_after"))),
                ("copy rate, records/s", None if rate is None else f"{rate:,.0f}"),
                ("copy rate", f"{mb}/s" if (mb := _mb(backlog.get("copy_bytes_per_s"))) else mb),
                ("producers add, records/s", backlog.get("inflow_records_per_s")),
                ("bytes per record", backlog.get("bytes_per_record"))]),
        f'<p class="muted">rate: {escape(str(backlog.get("rate_reason") or "—"))}; bytes of backlog are estimated '
        "from the bytes per record the copy measured (the uncopied records are not read).</p>",
        backlog_chart_svg(backlog.get("history") or [])])


def overview_backlog_chart(migration: str, history: Sequence[Mapping[str, Any]]) -> str:
    """A migration's backlog chart on the overview, drawn when its row is written (``publish``), never per GET."""
    return backlog_chart_svg(history, title=f"Backlog of {migration}", size=(8, 2.2))


def charted(rows: Sequence[Mapping[str, Any]]) -> set[str]:
    """The migrations whose backlog chart the overview shows: the ``WORST_N`` with the largest lag after their last
    batch (the others' ETAs are one line each, their chart on their last run's page): the page stays readable, and
    its size bounded, with hundreds of migrations."""
    with_history = [r for r in rows if r.get("backlog_history")]
    worst = sorted(with_history, key=lambda r: (-(r.get("lag") or 0), r.get("tenant") or "", r["migration"]))
    return {r["migration"] for r in worst[:WORST_N]}


def overview_backlog_section(rows: Sequence[Mapping[str, Any]], report_href: str = "") -> str:
    """Per migration that recorded a backlog: its ETA sentence and, for those ``charted`` picks, its backlog chart
    as stored with its row (``backlog_chart``: SVG text the row's writer drew); no chart is drawn here, so the
    overview's cost per request does not grow with matplotlib figures (issue 36 case 4)."""
    parts, lines = [], []
    shown = charted(rows)
    for r in sorted(rows, key=lambda r: (r.get("tenant") or "", r["migration"])):
        history = r.get("backlog_history") or []
        if not history and not r.get("eta"):
            continue
        eta = f"{escape(str(r['migration']))}: {escape(str(r.get('eta') or 'no ETA yet'))}"
        if history and r["migration"] not in shown:
            link = ""
            if r.get("dag_id") and r.get("last_run_id") and report_href:
                href = report_href.format(dag_id=quote(r["dag_id"], safe=""), run_id=quote(r["last_run_id"], safe=""))
                link = f' (<a href="{href}">chart on its last run</a>)'
            lines.append(f"<li>{eta}{link}</li>")
            continue
        chart = r.get("backlog_chart")
        parts += [f"<h3>{eta}</h3>",
                  chart if isinstance(chart, str) and chart.startswith("<svg") else
                  '<p class="muted">The backlog chart is drawn when the migration\'s next run writes its row.</p>']
    if lines:
        parts.append(f"<h3>{len(lines):,} more, with a smaller lag</h3><ul>{''.join(lines)}</ul>")
    return ("<h2>Backlog and ETA</h2>" + "".join(parts)) if parts else ""


LIVE_COLUMNS = (("source_topic", "source topic"), ("partition", "partition"), ("status", "status"),
                ("planned", "offsets planned"), ("copied", "offsets copied so far"), ("finished", "finished"))


def live_batch_page(view: Mapping[str, Any], run_id: str = "", details: Details | None = None) -> str:
    """A batch while it runs: per partition what is copied so far, the rate and the time to the batch's end
    (``core.batches.live_progress``); the page the translation task replaces with the batch's report."""
    title = f"{view['migration']}: batch {view['batch_id']} {'stopped' if view.get('stopped') else 'in progress'}"
    rate = view.get("records_per_s")
    state = (f'<span class="bad">stopped</span></p><p class="bad">{escape(str(view["stopped"]))}</p>'
             if view.get("stopped") else
             '<span class="warn">copying</span> (this page is rewritten while the batch runs)</p>')
    body = [f"<h1>{escape(title)}</h1>",
            f'<p class="muted">run {escape(run_id) or "—"} · started {_time(view.get("started_at_ms"))} · as of '
            f'{_time(view.get("as_of_ms"))} · {state}',
            f"<h2>{escape(str(view.get('sentence')))}</h2>",
            _cards([("partitions finished", f"{view.get('partitions_done')} / {view.get('partitions')}"),
                    ("offsets copied so far", view.get("copied")), ("offsets planned", view.get("planned")),
                    ("records/s", None if rate is None else f"{rate:,.0f}"),
                    ("to the batch's end", view.get("remaining_text"))]),
            '<p class="muted">A partition\'s progress is recorded when its copy finishes: one still copying shows '
            "0 until then.</p>",
            "<h2>Partitions of this batch</h2>",
            summarized("partitions", "partitions", LIVE_COLUMNS, view.get("rows", []),
                       left=("source_topic", "status", "finished"),
                       worst=lambda r: (r.get("status") == "finished", -(r.get("planned") or 0)),
                       worst_says="still copying first, most offsets planned first", totals=("planned", "copied"),
                       details=details, title="Partitions of this batch")]
    return page(title, "".join(body))


ROLLBACK_RANGE_COLUMNS = (("destination_topic", "destination topic"), ("partition", "partition"),
                          ("source_topic", "back to"), ("start", "from"), ("end", "to"), ("records", "records"),
                          ("copied_by_an_interrupted_run", "already back (interrupted run)"),
                          ("reason", "why from there"))
ROLLBACK_GROUP_COLUMNS = (("group", "group"), ("destination_topic", "destination topic"), ("partition", "partition"),
                          ("destination_offset", "stopped at"), ("source_offset", "resumes on the source at"),
                          ("method", "how"), ("reason", "why"))


UNMAPPED_ID_COLUMNS = (("schema_id", "destination schema id"), ("subject_versions", "destination subject/version"),
                       ("records", "records"), ("first", "first record"))


def _schema_ids_section(schema_ids: Mapping[str, Any]) -> str:
    """Remap mode: the ids a rollback would map back, and those it cannot (the rollback refuses on them)."""
    unmapped = schema_ids.get("unmapped_ids") or []
    rows = []
    for row in unmapped:
        versions = row.get("subject_versions")
        first = row.get("first_record") or {}
        rows.append({"schema_id": row.get("schema_id"), "records": row.get("records"),
                     "subject_versions": ", ".join(f"{v['subject']} v{v['version']}" for v in versions) or "none"
                     if isinstance(versions, list) else versions,
                     "first": f"{first.get('topic')}-{first.get('partition')} at {first.get('offset')} "
                              f"({first.get('field')})"})
    mapped = len(schema_ids.get("destination_to_source") or {})
    head = (f'<p class="bad">{escape(str(schema_ids.get("reason", "")))}</p>' if unmapped else
            f'<p>schema ids mapped back to the source\'s: {mapped} destination id(s) in the map</p>')
    return head + (table(UNMAPPED_ID_COLUMNS, rows, left=("subject_versions", "first")) if unmapped else "")


def _acls_section(acls: Mapping[str, Any]) -> str:
    """The ACLs a rollback needs on the source (granted for it only: ``core.acls.acl_plan.rollback_acls``), each the
    source's authorizer says is missing now marked."""
    missing = acls.get("missing") or []
    items = "".join(("<li class=\"bad\">missing: " if any(line[len("source: "):].startswith(m) for m in missing)
                     else "<li>") + f"{escape(line)}</li>" for line in acls.get("needed") or [])
    return f"<h3>ACLs the rollback needs on the source ({len(missing)} missing now)</h3><ul>{items}</ul>"


def rollback_plan_section(plan: Mapping[str, Any], details: Details | None = None) -> str:
    """What a rollback would copy back now and where each group would resume on the source (the promotion page
    and a rollback-plan run show it)."""
    if plan.get("error"):
        return f'<h2>Rollback plan</h2><p class="bad">{escape(str(plan["error"]))}</p>'
    ranges = [r for r in plan.get("copy_back", []) if r.get("records") or r.get("end", 0) > r.get("start", 0)]
    groups = [{"group": g, **r} for g, rows in plan.get("groups", {}).items() for r in rows]
    return "".join([f"<h2>Rollback plan: {_cell(plan.get('records', 0))} record(s) to copy back</h2>",
                    _schema_ids_section(plan["schema_ids"]) if plan.get("schema_ids") else "",
                    _acls_section(plan["acls"]) if plan.get("acls") else "",
                    _copy_back_table(ranges, details), _resume_table(groups, details)])


def _copy_back_table(ranges: Sequence[Mapping[str, Any]], details: Details | None) -> str:
    return summarized("copy-back", "partitions to copy back", ROLLBACK_RANGE_COLUMNS, ranges,
                      left=("destination_topic", "source_topic", "reason"),
                      worst=lambda r: (-(r.get("records") or 0), str(r.get("destination_topic")),
                                       r.get("partition") or 0),
                      worst_says="most records first", totals=("records",), details=details,
                      title="Rollback: copy back")


def _resume_table(groups: Sequence[Mapping[str, Any]], details: Details | None) -> str:
    return summarized("resume", "group partitions", ROLLBACK_GROUP_COLUMNS, groups,
                      left=("group", "destination_topic", "method", "reason"),
                      worst=lambda r: (r.get("method") in EXACT_METHODS, str(r["group"]),
                                       str(r.get("destination_topic")), r.get("partition") or 0),
                      worst_says="not exact first, then by group", details=details,
                      title="Rollback: where each group resumes")


def rollback_page(report: Mapping[str, Any], run_id: str = "", sections: Sequence[str] = (),
                  details: Details | None = None) -> str:
    """A rollback run (or its plan): status, the steps of this run, where every group resumes on the source;
    ``sections``: more HTML at the end (``reports.unit_status``: promoted / rolled back per unit)."""
    title = f"{report['migration']}: rollback"
    steps = [{"step": name, "status": step.get("status"), "seconds": step.get("duration_s")}
             for name, step in (report.get("this_run") or {}).items()]
    body = [f"<h1>{escape(title)}</h1>", f'<p class="muted">run {escape(run_id) or "—"}</p>',
            _cards([("status", report.get("status", "plan")),
                    ("groups", len(report.get("groups") or {}))])]
    if steps:
        body.append(table((("step", "step"), ("status", "status"), ("seconds", "seconds")), steps,
                          left=("step", "status")))
    if report.get("act"):
        body.append(act_section(report["act"]))
    if report.get("evidence"):
        body.append(evidence_section(report["evidence"], run_id))
    if "copy_back" in report:
        body.append(rollback_plan_section(report, details))
    else:
        groups = [{"group": g, **r} for g, rows in (report.get("groups") or {}).items() for r in rows]
        body.append(_resume_table(groups, details))
    return page(title, "".join(body + list(sections)))
