"""Pages at a real tenant's size (issue 39): 200 topics x 10 partitions, 200 groups. Each run page summarizes its big
tables (count, totals, the rows that need a look first) and stays small; every row is on a detail page one click
away, written beside the page and linked relative to the run page's URL (the plugin serves it under the run
page's own access check). Rendered from data: no broker, no Airflow."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from fastapi.routing import APIRoute

from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.reports.publish import (
    detail_page_path,
    publish_batch_run,
    publish_live_batch,
    publish_promotion_run,
    publish_rollback_run,
    run_page_path,
)
from kafka_ferry.reports.render import SUMMARY_AT, WORST_N, Details, batch_page
from kafka_ferry.reports.unit_status import units_section

TOPICS = [f"fleet.topic-{t:03d}" for t in range(200)]
PARTITIONS = [(t, p) for t in TOPICS for p in range(10)]
GROUPS = [f"fleet-group-{g:03d}" for g in range(200)]
RUN_ID = "manual__2026-11-27T02:00:00+00:00"
PAGE_LIMIT = 150_000  # bytes: a page a browser shows at once, whatever the tenant's size


def spec() -> MigrationSpec:
    return MigrationSpec.model_validate({
        "name": "fleet", "tenant": "acme", "source": {"connection_id": "src", "alias": "s"},
        "destination": {"connection_id": "dst", "alias": "d"}, "topics": {"include": ["fleet\\..*"]},
        "copy": {"spark_connection_id": "spark"}})


def group_rows() -> list[dict]:
    # each group reads one topic's 10 partitions; one partition of group 7 is translated inexactly (MM2's way)
    return [{"group": g, "source_topic": TOPICS[i], "partition": p, "upstream_offset": 40, "destination_topic":
             TOPICS[i], "downstream_offset": 40, "method": "mm2-sync" if (i, p) == (7, 3) else "exact-run",
             "reason": "r"} for i, g in enumerate(GROUPS) for p in range(10)]


def batch_report() -> dict:
    parts = [{"source_topic": t, "partition": p, "destination_topic": t, "start_offset": 0, "next_upstream_offset": 5,
              "records_copied": 5, "bytes_copied": 100, "syncs_written": 1, "lag_before": 5,
              "lag_after": 900 if (t, p) == (TOPICS[42], 9) else 0, "duration_s": 0.1} for t, p in PARTITIONS]
    decode = {"failed": 2, "checks": {}, "failures": [], "topics": {
        t: {"records": 50, "values_decoded": 50, "keys_decoded": 0, "plain": 50, "serialized": "value",
            "failed": 2 if t == TOPICS[199] else 0, "schema_types": {"AVRO": 50}} for t in TOPICS}}
    return {"migration": "fleet", "batch_id": "batch-1", "status": "succeeded", "records_copied": 10_000,
            "partitions": parts, "decode_check": decode}


def rows_of(html: str) -> int:
    return html.count("<tr>")


def test_a_batch_page_of_2000_partitions_and_200_groups_summarizes_and_links_every_row(tmp_path):
    page_path = publish_batch_run(spec(), tmp_path, RUN_ID, batch_report(), group_rows(), [])
    html = page_path.read_text()
    assert len(html) < PAGE_LIMIT and rows_of(html) < 5 * (WORST_N + 2), (len(html), rows_of(html))
    # the summary: counts and totals, and the rows that need a look come first
    assert "2,000 partitions; records 10,000; bytes 200,000; syncs 2,000" in html
    assert "200 group(s); methods: exact-run 1,999, mm2-sync 1" in html
    first_partition_row = re.search(r"Partitions of this batch</h2>.*?<tr><td class=\"l\">([^<]+)</td><td>(\d+)</td>",
                                    html, re.S)
    assert first_partition_row is not None  # the one partition still lagging comes first
    assert first_partition_row.groups() == (TOPICS[42], "9")
    assert f"<td class=\"l\">{GROUPS[7]}</td><td class=\"l\">{TOPICS[7]}</td><td>3</td>" in html.split(
        "Consumer groups")[1].split("</table>")[0].split("</tr>")[1]  # the inexact translation first
    assert "most failures first" in html and html.index(TOPICS[199]) < html.index("Consumer groups")
    # every row one click away: the link, relative to the run page's URL, names the file publish wrote
    for section, rows in (("partitions", 2000), ("groups", 2000), ("decode", 200)):
        href = f'{quote(RUN_ID, safe="")}/{section}'
        assert f'href="{href}"' in html, section
        detail = detail_page_path(tmp_path, RUN_ID, section).read_text()
        assert rows_of(detail) == rows + 1, section  # the heading row and every row
    assert TOPICS[123] in detail_page_path(tmp_path, RUN_ID, "partitions").read_text()
    assert page_path == run_page_path(tmp_path, RUN_ID)


def test_a_promotion_page_and_a_rollback_plan_at_2000_partitions_stay_small(tmp_path):
    reconciliation = {"mismatched": [f"{TOPICS[5]}-2"], "partitions": [
        {"source_topic": t, "partition": p, "source_count": 5, "destination_count": 4 if (t, p) == (TOPICS[5], 2)
         else 5, "matches": (t, p) != (TOPICS[5], 2)} for t, p in PARTITIONS]}
    report = {"migration": "fleet", "status": "promoted", "groups": group_rows(), "reconciliation": reconciliation,
              "timestamps": {t: {"destination_topic": t, "status": "kept", "at_promotion": None} for t in TOPICS}}
    html = publish_promotion_run(spec(), tmp_path, RUN_ID, report, []).read_text()
    assert len(html) < PAGE_LIMIT and rows_of(html) < 5 * (WORST_N + 2)
    assert "2,000 partitions; source records 10,000; destination records 9,999; the 20 shown mismatches first" in html
    assert html.index("MISMATCH</td>") < html.index("<td class=\"l\">ok</td>")
    for section in ("reconciliation", "groups", "timestamps"):
        assert f'href="{quote(RUN_ID, safe="")}/{section}"' in html
        assert detail_page_path(tmp_path, RUN_ID, section).is_file()

    plan = {"migration": "fleet", "records": 2000,
            "copy_back": [{"destination_topic": t, "partition": p, "source_topic": t, "start": 5, "end": 6,
                           "records": 1, "reason": "r"} for t, p in PARTITIONS],
            "groups": {g: [{"source_topic": TOPICS[i], "partition": p, "destination_topic": TOPICS[i],
                            "destination_offset": 5, "source_offset": 5, "method": "copied-back-record",
                            "reason": "r"} for p in range(10)] for i, g in enumerate(GROUPS)}}
    plan_html = publish_rollback_run(spec(), tmp_path, "manual__plan", plan).read_text()
    assert len(plan_html) < PAGE_LIMIT and "2,000 partitions to copy back; records 2,000" in plan_html
    assert rows_of(detail_page_path(tmp_path, "manual__plan", "copy-back").read_text()) == 2001
    assert rows_of(detail_page_path(tmp_path, "manual__plan", "resume").read_text()) == 2001


def test_the_live_page_and_the_units_section_summarize_too(tmp_path):
    view = {"migration": "fleet", "batch_id": "b", "partitions": 2000, "partitions_done": 1999, "rows": [
        {"source_topic": t, "partition": p, "status": "copying or waiting" if (t, p) == (TOPICS[3], 1)
         else "finished", "planned": 5, "copied": 5, "finished": "02:00:00"} for t, p in PARTITIONS]}
    html = publish_live_batch(tmp_path, RUN_ID, view).read_text()
    assert len(html) < PAGE_LIMIT and "copying or waiting" in html.split("<table>")[1].split("</tr>")[1]
    units = {"migration": {"status": "promoted"}, "units": [
        {"kind": "group", "name": g, "status": "rolled back" if g == GROUPS[150] else "promoted"} for g in GROUPS]
        + [{"kind": "topic", "name": t, "status": "promoted"} for t in TOPICS]}
    details = Details(RUN_ID)
    section = units_section(units, details)
    assert rows_of(section) == WORST_N + 1 and GROUPS[150] in section.split("</tr>")[1]
    assert rows_of(details["units"]) == 401 and f'href="{details.href("units")}"' in section


def test_small_tables_stay_whole_and_a_detail_name_is_never_taken_from_input(tmp_path):
    small = {**batch_report(), "partitions": batch_report()["partitions"][:SUMMARY_AT], "decode_check": None}
    details = Details(RUN_ID)
    html = batch_page(small, group_rows()[:SUMMARY_AT], [], RUN_ID, details)
    assert not details and rows_of(html) >= 2 * SUMMARY_AT and "All " not in html
    with pytest.raises(ValueError, match="no detail page"):
        detail_page_path(tmp_path, RUN_ID, "../../etc")


def test_the_plugin_serves_detail_pages_under_the_run_pages_own_access_check():
    from kafka_ferry import plugin

    routes = {r.path: r for r in plugin.app.routes if isinstance(r, APIRoute)}
    page, detail = routes["/runs/{dag_id}/{run_id}"], routes["/runs/{dag_id}/{run_id}/{section}"]
    evidence = routes["/runs/{dag_id}/{run_id}/evidence"]  # the run's evidence bundle, verified when asked for
    checks = lambda route: [d.call.__qualname__ for d in route.dependant.dependencies]  # noqa: E731
    assert checks(detail) == checks(page) == checks(evidence) and checks(page), checks(page)
    paths = [r.path for r in plugin.app.routes if isinstance(r, APIRoute)]
    assert paths.index(evidence.path) < paths.index(detail.path)  # matched first: "evidence" is not a section


def test_the_overview_of_200_migrations_charts_the_20_with_the_largest_lag_and_links_the_rest():
    from kafka_ferry.reports.render import overview_page

    chart = "<svg>" + "x" * 40_000 + "</svg>"  # a stored chart is tens of kB: 200 of them made a 10 MB page
    rows = [{"migration": f"m{i:03d}", "tenant": "acme", "dag_id": f"kafka_ferry__m{i:03d}", "last_run_id": "r1",
             "lag": 1000 - i, "eta": f"lag 0 in {i} min", "backlog_history": [{"at_ms": 1, "backlog": 1}],
             "backlog_chart": chart} for i in range(200)]
    html = overview_page(rows, report_href="/kafka-ferry/runs/{dag_id}/{run_id}")
    assert html.count("<svg>") == WORST_N and len(html) < 20 * 41_000 + PAGE_LIMIT
    assert "<h3>m000: lag 0 in 0 min</h3><svg>" in html and "<h3>m019: lag 0 in 19 min</h3><svg>" in html
    assert '<li>m199: lag 0 in 199 min (<a href="/kafka-ferry/runs/kafka_ferry__m199/r1">chart on its last run' in html
    assert "180 more, with a smaller lag" in html and html.count("<tr>") == 201  # every migration's row stays
