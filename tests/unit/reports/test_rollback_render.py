"""The rollback on the pages: its plan on the promotion page, a rollback run's page, "rolled back" on the overview."""

from __future__ import annotations

from kafka_ferry.reports.render import overview_page, promotion_page, rollback_page

PLAN = {"migration": "orders", "records": 3,
        "copy_back": [{"destination_topic": "orders.v1", "partition": 0, "source_topic": "orders", "start": 30,
                       "end": 34, "records": 3, "copied_by_an_interrupted_run": 7,
                       "reason": "after the last forward-copied record 29"},
                      {"destination_topic": "orders.v1", "partition": 1, "source_topic": "orders", "start": 9,
                       "end": 9, "records": 0, "reason": "after the last forward-copied record 8"}],
        "groups": {"billing": [{"source_topic": "orders", "partition": 0, "destination_topic": "orders.v1",
                                "destination_offset": 31, "source_offset": 41, "method": "copied-back-record",
                                "reason": "next record at or after 31 is 31, its copy is at 41"}]}}


def test_the_promotion_page_carries_the_rollback_plan():
    html = promotion_page({"migration": "orders", "status": "promoted", "groups": [], "rollback_plan": PLAN}, [])
    assert "Rollback plan: 3 record(s) to copy back" in html
    assert "after the last forward-copied record 29" in html and "record 8" not in html  # nothing to copy there
    assert "billing" in html and ">41<" in html and "copied-back-record" in html
    assert "already back (interrupted run)" in html and ">7<" in html  # what a killed copy-back wrote already
    broken = promotion_page({"migration": "orders", "status": "promoted", "groups": [],
                             "rollback_plan": {"error": "rollback plan not available: <boom>"}}, [])
    assert "rollback plan not available: &lt;boom&gt;" in broken


def test_a_rollback_page_shows_the_steps_and_where_groups_resume():
    report = {"migration": "orders", "status": "rolled-back", "groups": PLAN["groups"],
              "this_run": {"quiesce": {"status": "resumed"}, "copy_back": {"status": "done", "duration_s": 1.5}}}
    html = rollback_page(report, "manual__1")
    assert "orders: rollback" in html and "rolled-back" in html and "copy_back" in html and ">41<" in html
    assert "Rollback plan: 3 record(s)" in rollback_page(PLAN, "manual__2")


def test_the_overview_says_rolled_back():
    rows = [{"migration": "a", "promoted": False, "rolled_back": True}, {"migration": "b", "promoted": True},
            {"migration": "c", "promoted": False}]
    html = overview_page(rows)
    assert html.count("rolled back") == 1 and ">yes<" in html and ">no<" in html


def test_a_remap_plan_names_the_schema_ids_a_rollback_cannot_map_back():
    plan = {**PLAN, "schema_ids": {
        "mode": "remap", "destination_to_source": {"100001": 258}, "shared": {}, "refused": True,
        "reason": "1 destination schema id(s) the forward map never knew: a rollback now refuses before copying "
                  "anything",
        "unmapped_ids": [{"schema_id": 100002, "records": 3,
                          "subject_versions": [{"subject": "orders-value", "version": 2, "soft_deleted": False}],
                          "first_record": {"topic": "orders.v1", "partition": 0, "offset": 31, "field": "value",
                                           "schema_id": 100002}}]}}
    html = rollback_page(plan, "manual__3")
    assert "a rollback now refuses before copying anything" in html
    assert ">100002<" in html and "orders-value v2" in html and "orders.v1-0 at 31 (value)" in html
    fine = {**PLAN, "schema_ids": {"mode": "remap", "destination_to_source": {"100001": 258}, "unmapped_ids": [],
                                   "refused": False, "reason": "every id known"}}
    assert "schema ids mapped back to the source's: 1 destination id(s)" in rollback_page(fine)


def test_the_rollback_plan_lists_the_acls_it_needs_and_marks_the_missing_ones():
    acls = {"needed": ["source: ALLOW WRITE on TOPIC 'orders' for User:s (copy back)",
                       "source: ALLOW READ on GROUP 'billing' for User:s (commit)"],
            "missing": ["ALLOW READ on GROUP 'billing' for User:s"], "unchecked": []}
    html = rollback_page({**PLAN, "acls": acls}, "manual__4")
    assert "ACLs the rollback needs on the source (1 missing now)" in html
    assert "<li>source: ALLOW WRITE on TOPIC &#x27;orders&#x27; for User:s (copy back)</li>" in html
    assert '<li class="bad">missing: source: ALLOW READ on GROUP &#x27;billing&#x27;' in html
