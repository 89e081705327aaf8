"""Report pages: the numbers a person scans are on the page, values are escaped, nothing loads from elsewhere."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from kafka_ferry.reports.chart import lag_chart_svg, time_window
from kafka_ferry.reports.render import batch_page, overview_page, promotion_page

HISTORY = [{"batch_id": f"b{i}", "finished_at_ms": 1_795_000_000_000 + i * 60_000, "lag_before_total": 1000 - 300 * i,
            "lag_after_total": max(0, 700 - 300 * i)} for i in range(4)]
REPORT = {"migration": "orders", "batch_id": "batch-1", "status": "succeeded", "started_at_ms": 1_795_000_000_000,
          "finished_at_ms": 1_795_000_012_000, "duration_s": 12.0, "records_copied": 18000, "bytes_copied": 987654,
          "lag_before_total": 18000, "lag_after_total": 0, "syncs_written": 189, "records_resumed": 0,
          "gaps": [{"topic": "orders.events", "partition": 2, "lost_start": 10, "lost_end": 25, "lost_count": 15}],
          "partitions": [{"source_topic": "orders.events", "partition": 0, "destination_topic": "orders.events",
                          "start_offset": 0, "next_upstream_offset": 6000, "records_copied": 6000,
                          "bytes_copied": 321, "syncs_written": 63, "lag_before": 6000, "lag_after": 0,
                          "duration_s": 3.5}]}
GROUPS = [{"group": "<script>billing</script>", "source_topic": "orders.events", "partition": 0,
           "upstream_offset": 4000, "destination_topic": "orders.events", "downstream_offset": 4000,
           "method": "exact", "reason": "inside a contiguous run"}]


def external_loads(html: str) -> list[str]:
    """Anything a browser would fetch: scripts, stylesheets, images, frames (SVG namespace URIs are not fetched)."""
    return re.findall(r"<(?:script|link|img|iframe)\b|(?:src|href)=\"(?:https?:)?//", html)


def test_a_batch_page_shows_totals_partitions_gaps_groups_and_the_chart():
    html = batch_page(REPORT, GROUPS, HISTORY, run_id="scheduled__2026-11-22T10:00:00+00:00")
    for text in ("orders: batch batch-1", "scheduled__2026-11-22T10:00:00+00:00", "<b>18000</b>records copied",
                 "<b>189</b>offset syncs", "Retention gaps", "<td>10</td><td>25</td><td>15</td>",
                 "<td>6000</td><td>321</td><td>63</td><td>6000</td><td>0</td>", "inside a contiguous run", "<svg"):
        assert text in html, text
    assert "<script>billing" not in html and "&lt;script&gt;billing&lt;/script&gt;" in html
    assert external_loads(html) == []


def test_a_batch_page_shows_the_decode_check_per_topic_and_its_failures():
    check: dict[str, Any] = {"batch_id": "batch-1", "failed": 1, "checks": {"AVRO": "decoded with fastavro"},
             "topics": {"orders.events": {"records": 6000, "values_decoded": 5999, "keys_decoded": 6000, "plain": 0,
                                          "failed": 1, "schema_types": {"AVRO": 11999}}},
             "failures": [{"topic": "orders.events", "partition": 0, "offset": 17, "field": "value",
                           "schema_id": 44, "reason": "schema id 44 is not in the registry"}]}
    html = batch_page({**REPORT, "decode_check": check}, GROUPS, HISTORY)
    for text in ("1 record(s) do not decode", "<td>6000</td><td>5999</td><td>6000</td><td>0</td><td>1</td>",
                 "AVRO 11999", "First records that do not decode", "<td>17</td>", "<td>44</td>",
                 "schema id 44 is not in the registry", "AVRO: decoded with fastavro"):
        assert text in html, text
    clean = {**check, "failed": 0, "failures": [],
             "topics": {"orders.events": {**check["topics"]["orders.events"], "failed": 0}}}
    html = batch_page({**REPORT, "decode_check": clean}, GROUPS, HISTORY)
    assert "every record decodes" in html and "do not decode" not in html
    assert "Schemas: copied records" not in batch_page(REPORT, GROUPS, HISTORY)  # a migration without schemas


def test_the_decode_check_table_shows_which_fields_of_each_topic_are_registry_serialized():
    tally = {"records": 5, "values_decoded": 5, "keys_decoded": 0, "plain": 5, "failed": 0, "schema_types": {}}
    check = {"batch_id": "b", "failed": 0, "checks": {}, "failures": [],
             "topics": {"accounts": {**tally, "serialized": "value"}, "raw": {**tally, "serialized": "none"}}}
    html = batch_page({**REPORT, "decode_check": check}, GROUPS, HISTORY)
    assert "registry-serialized fields" in html
    assert '<td class="l">accounts</td><td class="l">value</td>' in html
    assert '<td class="l">raw</td><td class="l">none</td>' in html


def test_the_lag_chart_is_inline_svg_with_one_point_per_batch_and_a_note_without_batches():
    svg = lag_chart_svg(HISTORY)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "lag before batch" in svg and "lag after batch" in svg
    assert lag_chart_svg([]) == '<p class="muted">No batch has run yet: no lag history to draw.</p>'


def test_a_promotion_page_names_mismatched_partitions_and_lists_group_offsets():
    report = {"migration": "orders", "status": "in-progress", "generated_at_ms": 1_795_000_000_000,
              "duration_s": 3.2, "groups": GROUPS, "steps": {"final_copy": {"finished_at_ms": 1_795_000_000_000}},
              "reconciliation": {"mismatched": ["orders.events-1"], "partitions": [
                  {"source_topic": "orders.events", "partition": 0, "source_count": 5, "destination_count": 5,
                   "matches": True},
                  {"source_topic": "orders.events", "partition": 1, "source_count": 5, "destination_count": 4,
                   "matches": False}]}}
    html = promotion_page(report, HISTORY, run_id="manual__1")
    assert 'Reconciliation: <span class="bad">MISMATCH: orders.events-1</span>' in html
    assert "<td>5</td><td>4</td><td class=\"l\">MISMATCH</td>" in html
    assert "<td>4000</td><td class=\"l\">orders.events</td><td>4000</td><td class=\"l\">exact</td>" in html
    assert external_loads(html) == []
    ok = promotion_page({**report, "status": "promoted", "reconciliation": {"mismatched": [], "partitions": []}}, [])
    assert 'Reconciliation: <span class="ok">all partitions match</span>' in ok


def test_the_overview_lists_each_migration_with_a_link_to_its_last_run():
    rows: list[dict[str, Any]] = [
        {"migration": "orders", "tenant": "acme", "dag_id": "kafka_ferry__orders", "last_run_id": "manual__a+b",
         "last_batch": "batch-9", "last_batch_at_ms": 1_795_000_000_000, "lag": 0, "promoted": True,
         "reconciliation": "ok"},
        {"migration": "billing", "tenant": "acme", "dag_id": "kafka_ferry__billing", "last_run_id": None}]
    html = overview_page(rows, report_href="/kafka-ferry/runs/{dag_id}/{run_id}")
    assert html.index("billing") < html.index("orders")  # by tenant, then name
    assert '<a href="/kafka-ferry/runs/kafka_ferry__orders/manual__a%2Bb">manual__a+b</a>' in html
    assert '<td class="l ok">yes</td>' in html and '<td class="l ">no</td>' in html
    # the lag the last batch left, said as such and with its time: not the lag now
    assert "<th class=\"l\">lag after the last batch</th>" in html and "current lag" not in html
    assert '<td>0 <span class="muted">at 2026-11-18 11:06:40 UTC</span></td>' in html
    assert "no migration has reported yet" in overview_page([])


def test_a_single_batch_gets_a_two_minute_axis_and_a_long_history_its_own_span():
    one = [datetime(2026, 11, 24, 0, 53, 30, tzinfo=UTC)]
    assert time_window(one) == (datetime(2026, 11, 24, 0, 52, 30, tzinfo=UTC),
                                datetime(2026, 11, 24, 0, 54, 30, tzinfo=UTC))
    hours = [datetime(2026, 11, 24, h, tzinfo=UTC) for h in (1, 3, 2)]
    assert time_window(hours) == (hours[0], hours[1])


def test_timestamp_switches_read_as_settings_not_as_a_mapping():
    report = {"migration": "orders", "status": "promoted", "reconciliation": {"mismatched": [], "partitions": []},
              "timestamps": {"orders.events": {"destination_topic": "orders.events", "status": "switched",
                                               "at_promotion": {"message.timestamp.type": "LogAppendTime",
                                                                "message.timestamp.before.max.ms": None}}}}
    html = promotion_page(report, [])
    assert ("message.timestamp.before.max.ms: broker default; message.timestamp.type = LogAppendTime") in html
    assert "{" not in html.split("Timestamp types")[1].split("</table>")[0]


def test_a_staged_cutover_page_shows_each_group_and_topic_and_the_offsets_committed_this_run():
    from kafka_ferry.core.cutover.staged_cutover import GROUP_STEPS, TOPIC_STEPS
    from kafka_ferry.reports.render import staged_page

    decisions = [{**GROUPS[0], "group": "billing", "downstream_offset": 3999}]
    groups = {"billing": {"name": "billing", "run_id": "run-7", "started_at_ms": 1_795_000_000_000,
                          "promoted_at_ms": 1_795_000_030_000, "steps_done": list(GROUP_STEPS),
                          "detail": {"translated": {"decisions": decisions},
                                     "reconciled": {"partitions": 6, "ok": True}, "final_copy": {"batches": 2},
                                     "promoted": {"fence_lifted": 1}}},
              "audit": {"name": "audit", "run_id": "run-6", "started_at_ms": 1_795_000_000_000,
                        "steps_done": ["source_quiet", "final_copy"], "detail": {}}}
    html = staged_page("orders", groups, {}, ["billing", "audit", "<b>late</b>"], ["orders.events"], GROUP_STEPS,
                       TOPIC_STEPS, ["billing"], "run-7")
    for text in ("orders: staged cutover", "<b>1 / 3</b>groups promoted", "<b>0 / 1</b>topics promoted",
                 "in progress (2/6)", "source_quiet, final_copy",
                 "reconciled 6 partition(s); final copy in 2 batch(es); fence lifted", "run-7", "not started",
                 "<td>3999</td>", "this run: billing"):
        assert text in html, text
    assert "<b>late</b>" not in html and "&lt;b&gt;late&lt;/b&gt;" in html
    assert external_loads(html) == []


def test_a_promotion_page_sums_the_decode_check_over_the_whole_migration():
    from kafka_ferry.promotion.promotion_report import decode_totals

    marks = {"orders.events:0": {"destination_topic": "orders.events", "partition": 0, "records": 10, "decoded": 10,
                                 "plain": 10, "failed": 0},
             "orders.events:1": {"destination_topic": "orders.events", "partition": 1, "records": 7, "decoded": 6,
                                 "plain": 7, "failed": 1}}
    totals = decode_totals(marks)
    assert totals == {"orders.events": {"records": 17, "decoded": 16, "plain": 17, "failed": 1}}
    html = promotion_page({"migration": "orders", "decode_totals": totals}, HISTORY)
    assert "1 record(s) did not decode" in html and "<td>17</td><td>16</td><td>17</td><td>1</td>" in html
    assert "the decode check" not in promotion_page({"migration": "orders", "decode_totals": {}}, HISTORY)


def test_a_cutover_page_and_the_overview_say_who_did_it_escaped():
    """Who did it (state kind act, issue 42): a user name is input, shown escaped."""
    from kafka_ferry.core.cutover.authority import Actor, act_line, act_record, finished
    from kafka_ferry.reports.render import rollback_page

    act = finished(act_record("promote", "orders", Actor("<b>eve</b>", "manual"), "orders", "manual__1",
                              1_795_000_000_000, allowed="user '<b>eve</b>' listed"), 1_795_000_060_000)
    report = {"migration": "orders", "status": "promoted", "reconciliation": {"mismatched": [], "partitions": []},
              "act": act}
    for html in (promotion_page(report, []), rollback_page({**report, "status": "rolled-back"})):
        assert "<h2>Who did it</h2>" in html and "<b>eve</b>" not in html
        assert ('<td class="l">promote</td><td class="l">&lt;b&gt;eve&lt;/b&gt;</td><td class="l">user '
                "&#x27;&lt;b&gt;eve&lt;/b&gt;&#x27; listed</td><td class=\"l\">orders</td>") in html
        assert "2026-11-18 11:07:40 UTC" in html
    assert "Who did it" not in promotion_page({**report, "act": None}, [])
    row = {"migration": "orders", "tenant": "acme", "promoted": True, "last_act": act_line(act)}
    assert '<br><span class="muted">promote by &#x27;&lt;b&gt;eve&lt;/b&gt;&#x27;, confirmed' in overview_page([row])
