"""The batch report: totals are sums of the partition rows, lag and gaps come from the plan, lines are readable."""

from __future__ import annotations

from test_copy_plan import sample_plan

from kafka_ferry.copy.report import build_report, report_lines


def row(partition: int, copied: int, **extra) -> dict:
    return {"source_topic": "orders", "partition": partition, "destination_topic": "src.orders",
            "planned_start": 0, "planned_end": 10, "start_offset": 0, "next_upstream_offset": copied,
            "records_copied": copied, "bytes_copied": 10 * copied, "records_resumed": extra.get("resumed", 0),
            "records_skipped_loop": 0, "syncs_written": 2, "capped": extra.get("capped", False),
            "duration_s": 0.1}


def test_totals_lag_and_gaps():
    report = build_report(sample_plan(), [row(1, 490, capped=True), row(0, 0, resumed=7)],
                          {"orders:0": 0, "orders:1": 0, "orders:2": 0}, 1000, 3500)
    assert (report["records_copied"], report["bytes_copied"], report["records_resumed"]) == (490, 4900, 7)
    assert report["syncs_written"] == 4 and report["duration_s"] == 2.5
    assert report["partitions_copied"] == 2 and report["partitions_planned"] == 2
    assert (report["lag_before_total"], report["lag_after_total"]) == (497, 0)
    assert [p["partition"] for p in report["partitions"]] == [0, 1]
    assert report["partitions"][1]["lag_before"] == 490
    assert report["gaps"] == [{"topic": "orders", "partition": 2, "lost_start": 0, "lost_end": 40, "lost_count": 40}]


def test_lines_name_partitions_caps_and_gaps():
    lines = report_lines(build_report(sample_plan(), [row(1, 490, capped=True)], {}, 0, 1000))
    assert lines[0].startswith("batch batch-abc of m: succeeded in 1.0 s, 490 records / 4900 bytes copied")
    assert any("orders-1 -> src.orders: [0, 490) 490 records" in line and "(capped)" in line for line in lines)
    assert lines[-1] == ("  GAP orders-2 [0, 40): 40 offsets lost to source retention before they were copied")
