"""The backlog section of a run page, the overview's backlog charts and a running batch's page."""

from __future__ import annotations

import re
from typing import Any

from kafka_ferry.core.batches.backlog_eta import RunPoint, estimate
from kafka_ferry.core.batches.live_progress import live_view
from kafka_ferry.reports.publish import overview_backlog
from kafka_ferry.reports.render import batch_page, live_batch_page, overview_backlog_chart, overview_page

T0 = 1_795_000_000_000
HISTORY: list[dict[str, Any]] = [
    {"batch_id": f"b{i}", "finished_at_ms": T0 + i * 3_600_000, "backlog_before": 9000 - 1000 * i,
     "backlog_after": 8000 - 1000 * i, "backlog_bytes_after": (8000 - 1000 * i) * 1000} for i in range(4)]


def backlog_section() -> dict:
    points = [RunPoint(h["batch_id"], h["finished_at_ms"], 10.0, 1000, 1_000_000, h["backlog_before"],
                       h["backlog_after"], "limit") for h in HISTORY]
    est = estimate(5000, points, max_bytes_per_s=35_000_000, window_s=4 * 3600).as_dict()
    return {**est, "backlog_before": 6000, "backlog_after": 5000, "backlog_bytes_after": 5_000_000,
            "history": HISTORY}


REPORT = {"migration": "orders", "batch_id": "b3", "status": "succeeded", "started_at_ms": T0, "finished_at_ms": T0,
          "partitions": [], "gaps": []}


def test_a_run_page_shows_every_eta_with_its_reason_and_charts_the_backlog():
    section = backlog_section()
    html = batch_page({**REPORT, "backlog": section}, [], [])
    assert "<h2>Backlog and ETA</h2>" in html
    for e in section["etas"]:
        assert e["sentence"] in html and e["reason"].split(";")[0] in html
    assert "at 35 MB/s" in html and "<b>5000</b>backlog after (offsets)" in html and "5.0 MB" in html
    assert html.count("<svg") == 1 and "(estimated)" in html  # the backlog chart (no lag history here)
    assert "Backlog and ETA" not in batch_page(REPORT, [], [])  # a report written before the section existed


def test_the_overview_shows_each_migrations_eta_and_backlog_chart():
    row = {"migration": "orders", "tenant": "acme", "dag_id": "kafka_ferry__orders", "last_run_id": "r",
           **overview_backlog({"backlog": backlog_section()})}
    assert row["backlog_history"] == HISTORY and row["eta"].startswith("at the measured rate")
    chart = overview_backlog_chart("orders", HISTORY)  # drawn when the row is written (publish), read per GET
    html = overview_page([{**row, "backlog_chart": chart}, {"migration": "quiet", "tenant": "acme"}],
                         report_href="/r/{dag_id}/{run_id}")
    assert f"<h3>orders: {row['eta']}</h3>" in html and html.count("<svg") == 1 and chart in html
    assert overview_backlog({}) == {}


def test_a_running_batchs_page_shows_each_partition_the_rate_and_the_time_to_the_end():
    tasks = [{"source_topic": "orders", "partition": p, "start_offset": 100, "end_offset": 1100} for p in range(3)]
    progress = {("orders", 0): {"batch_id": "b9", "next_upstream_offset": 1100, "written_at_ms": T0 + 10_000},
                ("orders", 1): {"batch_id": "b8", "next_upstream_offset": 100, "written_at_ms": T0 - 99_000}}
    view = live_view("orders", "b9", tasks, progress, T0, T0 + 12_000)
    assert [(r["status"], r["copied"]) for r in view["rows"]] == [
        ("finished", 1000), ("copying or waiting", 0), ("copying or waiting", 0)]  # b8's record is the last batch's
    assert view["records_per_s"] == 100.0 and view["remaining_s"] == 20.0
    html = live_batch_page(view, "manual__1")
    assert "1 of 3 partitions finished, 1,000 of 3,000 offsets copied at 100 records/s: the batch" in html
    assert "end in about 20 s" in html and "orders: batch b9 in progress" in html
    assert re.search(r"<b>1 / 3</b>partitions finished", html)
    stopped = live_batch_page({**view, "stopped": "the copy task stopped <x>"})
    assert "batch b9 stopped" in stopped and "&lt;x&gt;" in stopped


def test_before_any_partition_finishes_there_is_no_rate_and_when_all_have_the_batch_is_closing():
    tasks = [{"source_topic": "t", "partition": 0, "start_offset": 0, "end_offset": 5}]
    assert "no rate yet" in live_view("m", "b", tasks, {}, T0, T0)["sentence"]
    done = live_view("m", "b", tasks, {("t", 0): {"batch_id": "b", "next_upstream_offset": 5,
                                                   "written_at_ms": T0 + 500}}, T0, T0 + 600)
    assert done["remaining_s"] == 0 and "every partition finished" in done["sentence"]
    assert live_view("m", "b", [], {}, T0, T0)["sentence"].startswith("nothing planned")
