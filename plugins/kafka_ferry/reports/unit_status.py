"""Promoted or rolled back: where the migration and each of its groups and topics stand, for the run pages and the
Migrations overview.

Pure: the state topic's snapshot (``read_all``) in, rows and HTML out. Read from the records the promotions and
rollbacks write, in this order (the first that holds decides, so a unit promoted again after a rollback shows
promoted, and one whose rollback was killed after its mark shows rolled back, as ``promotion.topic_rollback`` reads
it):

  1. a staged promotion record marked promoted, unless a rollback record undoes (or undid) exactly that promotion
  2. the whole migration promoted (the unit moved with it)
  3. a staged rollback record: rolled back, or rolling back (its steps done so far)
  4. the whole migration rolled back, naming the unit
  5. a staged promotion in progress (its steps done so far)
  6. not promoted
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from kafka_ferry.core.common.state_records import (
    GROUP_PROMOTION_KIND,
    MIGRATION_KEY,
    PROMOTION_KIND,
    ROLLBACK_KIND,
    TOPIC_PROMOTION_KIND,
    under,
)
from kafka_ferry.core.cutover.staged_cutover import GROUP_STEPS, TOPIC_ROLLBACK_STEPS, TOPIC_STEPS
from kafka_ferry.reports.render import SUMMARY_AT, WORST_N, Details, _cards, _cell, _time, page

PROMOTED, ROLLED_BACK, NOT_PROMOTED, STAGED = "promoted", "rolled back", "not promoted", "staged cutover"
UNIT_COLUMNS = (("kind", "kind"), ("name", "name"), ("status", "status"), ("since", "since"), ("how", "how"))


def migration_status(state: Mapping[Any, Mapping[str, dict]]) -> dict[str, Any]:
    """The whole migration: promoted, rolled back, or not promoted (its staged units are counted apart)."""
    promoted = PROMOTION_KIND.records(state).get(MIGRATION_KEY) or {}
    rolled = ROLLBACK_KIND.records(state).get("migration") or {}
    if promoted.get("status") == "promoted":
        return {"status": PROMOTED, "since_ms": promoted.get("promoted_at_ms"), "how": "promote"}
    if rolled.get("status") == "rolled-back":
        return {"status": ROLLED_BACK, "since_ms": rolled.get("rolled_back_at_ms"), "how": "rollback",
                "topics": list(rolled.get("topics") or []), "groups": list(rolled.get("groups") or [])}
    return {"status": NOT_PROMOTED, "since_ms": None, "how": ""}


def unit_status(kind: str, promotion: Mapping | None, rollback: Mapping | None, migration: Mapping[str, Any],
                name: str) -> dict[str, Any]:
    """One group's or topic's status (``kind``: "group" or "topic"), by the order in the module docstring."""
    steps = GROUP_STEPS if kind == "group" else TOPIC_STEPS
    promotion, rollback = promotion or {}, rollback or {}
    done = [s for s in promotion.get("steps_done") or [] if s in steps]
    at = promotion.get("promoted_at_ms")
    undoing = rollback.get("promoted_at_ms") == at and rollback.get("status") in ("rolled-back", "in-progress")
    if "promoted" in done and not undoing:
        return {"status": PROMOTED, "since_ms": at, "how": f"promote-{kind}s, run {promotion.get('run_id', '')}"}
    if migration["status"] == PROMOTED:
        return {"status": PROMOTED, "since_ms": migration["since_ms"], "how": "with the whole migration"}
    if rollback.get("status") == "rolled-back":
        return {"status": ROLLED_BACK, "since_ms": rollback.get("rolled_back_at_ms"), "how": f"rollback of the {kind}"
                + (f" (groups along: {', '.join(rollback['groups'])})" if rollback.get("groups") else "")}
    if rollback.get("status") == "in-progress":
        return {"status": f"rolling back ({len(rollback.get('steps') or {})}/{len(TOPIC_ROLLBACK_STEPS)} steps)",
                "since_ms": None, "how": f"rollback of the {kind}"}
    if migration["status"] == ROLLED_BACK and name in migration.get(f"{kind}s", []):
        return {"status": ROLLED_BACK, "since_ms": migration["since_ms"], "how": "with the whole migration"}
    if done:
        return {"status": f"promoting ({len(done)}/{len(steps)} steps)", "since_ms": None, "how": f"promote-{kind}s"}
    return {"status": NOT_PROMOTED, "since_ms": None, "how": ""}


def unit_statuses(state: Mapping[Any, Mapping[str, dict]], groups: Iterable[str] = (),
                  topics: Iterable[str] = ()) -> dict[str, Any]:
    """The migration's status and one row per group and topic (those named, and any with a record)."""
    migration = migration_status(state)
    rollbacks = ROLLBACK_KIND.records(state)
    rows = []
    for kind, promotions_kind, wanted in (("group", GROUP_PROMOTION_KIND, groups),
                                          ("topic", TOPIC_PROMOTION_KIND, topics)):
        promotions = promotions_kind.records(state)
        undone = under(rollbacks, f"{kind}/")
        for name in sorted(set(wanted) | set(promotions) | set(undone)):
            rows.append({"kind": kind, "name": name,
                         **unit_status(kind, promotions.get(name), undone.get(name), migration, name)})
    if migration["status"] == NOT_PROMOTED and any(r["status"] in (PROMOTED, ROLLED_BACK) for r in rows):
        migration = {**migration, "status": STAGED}  # units moved one by one, the migration as a whole did not
    return {"migration": migration, "units": rows}


def counts(units: Mapping[str, Any]) -> str:
    """The overview's one-line summary: per kind, how many are promoted and rolled back, of how many."""
    parts = []
    for kind in ("group", "topic"):
        rows = [r for r in units["units"] if r["kind"] == kind]
        promoted = sum(r["status"] == PROMOTED for r in rows)
        rolled = sum(r["status"] == ROLLED_BACK for r in rows)
        parts.append(f"{kind}s {promoted}/{len(rows)} promoted" + (f", {rolled} rolled back" if rolled else ""))
    return "; ".join(parts)


def _units_table(rows: Iterable[Mapping[str, Any]]) -> str:
    css = {PROMOTED: "ok", ROLLED_BACK: "warn"}
    head = "".join(f'<th class="l">{escape(h)}</th>' for _, h in UNIT_COLUMNS)
    body = "".join(
        f'<tr><td class="l">{_cell(r["kind"])}</td><td class="l">{_cell(r["name"])}</td>'
        f'<td class="l {css.get(r["status"], "")}">{_cell(r["status"])}</td>'
        f'<td class="l">{_time(r.get("since_ms"))}</td><td class="l">{_cell(r.get("how") or "—")}</td></tr>'
        for r in rows) or '<tr><td class="l" colspan="5">no group or topic recorded yet</td></tr>'
    return f"<table><tr>{head}</tr>{body}</table>"


def units_section(units: Mapping[str, Any], details: Details | None = None) -> str:
    """The run page's section: the migration's status, then one row per group and topic (promoted in green,
    rolled back in amber); above ``render.SUMMARY_AT`` units, those not promoted first and every unit on the
    detail page ``units`` (``render``'s module docstring)."""
    m = units["migration"]
    rows = list(units["units"])
    cards = _cards([("migration", m["status"]), ("since", _time(m.get("since_ms"))), ("units", counts(units))])
    if len(rows) <= SUMMARY_AT:
        return "".join(["<h2>Promoted / rolled back</h2>", cards, _units_table(rows)])
    order = {PROMOTED: 2, ROLLED_BACK: 0}
    shown = sorted(rows, key=lambda r: (order.get(r["status"], 1), r["kind"], r["name"]))[:WORST_N]
    link = ""
    if details is not None:
        details["units"] = page(f"Promoted / rolled back: all {len(rows):,} groups and topics",
                                f"<h1>Promoted / rolled back: all {len(rows):,} groups and topics</h1>"
                                + _units_table(rows))
        link = f' <a href="{escape(details.href("units"))}">All {len(rows):,} groups and topics</a>'
    return "".join(["<h2>Promoted / rolled back</h2>", cards,
                    f'<p class="summary">{len(rows):,} groups and topics; the {len(shown)} shown rolled back '
                    f"first, then those not promoted.{link}</p>", _units_table(shown)])
