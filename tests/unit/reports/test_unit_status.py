"""Promoted / rolled back per migration, group and topic, as the run pages and the Migrations overview show it."""

from __future__ import annotations

import json
from typing import Any

from kafka_ferry.core.common.state_records import (
    GROUP_KIND,
    GROUP_PROMOTION_KIND,
    PROMOTION_KIND,
    ROLLBACK_KIND,
    TOPIC_KIND,
    TOPIC_PROMOTION_KIND,
    StateKind,
)
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.reports.publish import publish_rollback_run
from kafka_ferry.reports.unit_status import counts, unit_statuses, units_section

ALL_TOPIC_STEPS = ["source_quiet", "final_copy", "reconciled", "promoted"]
ALL_GROUP_STEPS = ["source_quiet", "final_copy", "translated", "committed", "reconciled", "promoted"]


def promoted(at: int, steps=ALL_TOPIC_STEPS, run="run-1") -> dict:
    return {"name": "x", "run_id": run, "steps_done": steps, "started_at_ms": at - 1, "promoted_at_ms": at}


def staged_state() -> dict:
    """orders.a promoted; orders.b rolled back (promotion forgotten); orders.c rolled back then promoted again;
    orders.d killed after its rollback's mark (promotion still there); orders.e rolling back; orders.f never
    promoted. Groups: billing promoted, audit rolled back with orders.b, late promoting."""
    return {
        TOPIC_KIND: {t: {"destination_topic": t, "partitions": 2} for t in
                     ("orders.a", "orders.b", "orders.c", "orders.d", "orders.e", "orders.f")},
        GROUP_KIND: {g: {"source_topics": ["orders.a"]} for g in ("billing", "audit", "late", "<b>x</b>")},
        TOPIC_PROMOTION_KIND: {"orders.a": promoted(1_000), "orders.c": promoted(9_000),
                               "orders.d": promoted(4_000), "orders.e": promoted(5_000)},
        GROUP_PROMOTION_KIND: {"billing": promoted(1_000, ALL_GROUP_STEPS),
                               "late": {"name": "late", "run_id": "r", "steps_done": ["source_quiet"],
                                        "started_at_ms": 1}},
        ROLLBACK_KIND: {
            "topic/orders.b": {"status": "rolled-back", "promoted_at_ms": 2_000, "rolled_back_at_ms": 3_000,
                               "groups": ["audit"], "steps": {}},
            "topic/orders.c": {"status": "rolled-back", "promoted_at_ms": 2_500, "rolled_back_at_ms": 3_500},
            "topic/orders.d": {"status": "rolled-back", "promoted_at_ms": 4_000, "rolled_back_at_ms": 4_500},
            "topic/orders.e": {"status": "in-progress", "promoted_at_ms": 5_000,
                               "steps": {"quiesce": {}, "copy_back": {}}},
            "group/audit": {"status": "rolled-back", "promoted_at_ms": 2_000, "rolled_back_at_ms": 3_000},
        },
    }


def statuses(state) -> dict[tuple[str, str], str]:
    units = unit_statuses(state, GROUP_KIND.records(state), TOPIC_KIND.records(state))
    return {(r["kind"], r["name"]): r["status"] for r in units["units"]}


def test_each_unit_says_promoted_or_rolled_back_from_its_records():
    assert statuses(staged_state()) == {
        ("group", "<b>x</b>"): "not promoted", ("group", "audit"): "rolled back", ("group", "billing"): "promoted",
        ("group", "late"): "promoting (1/6 steps)",
        ("topic", "orders.a"): "promoted", ("topic", "orders.b"): "rolled back",
        ("topic", "orders.c"): "promoted",  # promoted again after its rollback
        ("topic", "orders.d"): "rolled back",  # the rollback's mark undid exactly this promotion
        ("topic", "orders.e"): "rolling back (2/5 steps)", ("topic", "orders.f"): "not promoted"}


def test_the_whole_migration_promoted_or_rolled_back():
    state: dict[StateKind, dict[str, dict[str, Any]]] = {
        TOPIC_KIND: {"t": {}}, GROUP_KIND: {"g": {"source_topics": ["t"]}},
        PROMOTION_KIND: {"migration": {"status": "promoted", "promoted_at_ms": 7_000}}}
    units = unit_statuses(state, ["g"], ["t"])
    assert units["migration"]["status"] == "promoted"
    assert {r["status"] for r in units["units"]} == {"promoted"}
    state[PROMOTION_KIND] = {}
    state[ROLLBACK_KIND] = {"migration": {"status": "rolled-back", "rolled_back_at_ms": 8_000, "topics": ["t"],
                                          "groups": ["g"]}}
    units = unit_statuses(state, ["g"], ["t"])
    assert units["migration"]["status"] == "rolled back"
    assert [(r["status"], r["how"]) for r in units["units"]] == [("rolled back", "with the whole migration")] * 2


def test_the_rendered_section_marks_and_escapes():
    state = staged_state()
    units = unit_statuses(state, GROUP_KIND.records(state), TOPIC_KIND.records(state))
    html = units_section(units)
    assert "<h2>Promoted / rolled back</h2>" in html
    assert '<td class="l">orders.b</td><td class="l warn">rolled back</td>' in html
    assert '<td class="l">orders.a</td><td class="l ok">promoted</td>' in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    assert "rollback of the topic (groups along: audit)" in html
    assert counts(units) == "groups 1/4 promoted, 1 rolled back; topics 2/6 promoted, 2 rolled back"
    assert units["migration"]["status"] == "staged cutover" and "<b>staged cutover</b>migration" in html


def test_a_unit_rollback_run_page_and_the_overview_row(tmp_path):
    spec = MigrationSpec.model_validate({
        "name": "orders", "tenant": "t", "source": {"connection_id": "s", "alias": "src"},
        "destination": {"connection_id": "d", "alias": "dst"}, "topics": {"include": ["orders\\..*"]},
        "copy": {"spark_connection_id": "spark"}})
    report = {"migration": "orders", "status": "rolled-back", "topics": {}, "groups": {}}
    page = publish_rollback_run(spec, tmp_path, "manual__1", {**report, "status": "topics rolled back"},
                                staged_state())
    html = page.read_text()
    assert "Promoted / rolled back" in html and '<td class="l warn">rolled back</td>' in html
    row = json.loads((tmp_path / "overview.json").read_text())
    assert row["staged"] == "groups 1/4 promoted, 1 rolled back; topics 2/6 promoted, 2 rolled back"
    assert row["promoted"] is False and "rolled_back" not in row  # the migration itself was not rolled back
