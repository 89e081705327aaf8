"""The copier's side of the rate limit and the window (``copy.throttle``, ``copy.runner.group_pace``, the report's
stop reasons): waits only delay, shares never exceed the limit, a deadline ends a range where it is."""

from __future__ import annotations

import dataclasses

import pytest
from test_copy_plan import SPEC, sample_plan
from test_copy_report import row

from kafka_ferry.copy.planning import build_plan
from kafka_ferry.copy.range_copy import RangeCursor
from kafka_ferry.copy.report import build_report, report_lines
from kafka_ferry.copy.runner import group_pace
from kafka_ferry.copy.throttle import BatchPace
from kafka_ferry.core.batches.batch_planning import PartitionPosition
from kafka_ferry.core.batches.rate_limit import RateLimit
from kafka_ferry.core.specs.spec import parse_spec


class Clock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_chunk_over_budget_waits_serving_reports_and_never_past_the_deadline():
    clock = Clock()
    pace = BatchPace(RateLimit(records_per_second=100), deadline_ms=int((clock.now + 3) * 1000), clock=clock,
                     wall=clock)
    assert pace.limited and not pace.past_deadline()
    assert pace.chunk_records() == 25
    wait = pace.charge(200, 2000)  # 2 s of the limit, less the burst of 0.1 s
    assert wait == pytest.approx(1.9)
    served = []

    def poll(timeout):  # the producer's poll: time passes while it serves reports
        served.append(timeout)
        clock.now += timeout

    assert pace.wait(wait, poll) == pytest.approx(1.9)
    assert served and max(served) <= 0.1 + 1e-9 and pace.waited_s == pytest.approx(1.9)
    assert pace.charge(1000, 10_000) == pytest.approx(3 - 1.9)  # 10 s of debt, but only 1.1 s to the deadline
    clock.now += 1.1
    assert pace.past_deadline()


def test_no_limit_no_wait_and_no_deadline():
    pace = BatchPace(RateLimit())
    assert not pace.limited and pace.chunk_records() is None
    assert pace.charge(10**9, 10**12) == 0 and not pace.past_deadline() and pace.seconds_to_deadline() is None


def test_a_deadline_stops_the_range_where_it_is_like_a_cap():
    cursor = RangeCursor(10, 1000, 10**6, 10**9)
    cursor.next_offset = 250
    cursor.stop_at_deadline()
    assert cursor.done and cursor.at_deadline and not cursor.capped and cursor.next_offset == 250
    assert RangeCursor(0, 10_000, 10, 10).batch_size(25) == 25
    assert RangeCursor(0, 10, 10, 10).batch_size(25) == 10 and RangeCursor(0, 10**6, 1, 1).batch_size(0) == 1


def rate(value: float | None) -> float:
    """A share's rate, which a limited share always has."""
    assert value is not None
    return value


def test_each_group_gets_its_offsets_share_of_the_limit_and_the_plan_deadline():
    plan = dataclasses.replace(sample_plan(), max_bytes_per_second=1000, max_records_per_second=None,
                               deadline_ms=123)
    shares = [group_pace(plan, [task]) for task in plan.tasks]  # 490 and 7 of 497 offsets
    assert [round(rate(p.limit.bytes_per_second), 3) for p in shares] == [round(1000 * 490 / 497, 3),
                                                                   round(1000 * 7 / 497, 3)]
    assert sum(rate(p.limit.bytes_per_second) for p in shares) <= 1000 * (1 + 1e-9)
    assert group_pace(plan, plan.tasks).limit == RateLimit(1000, None)
    assert all(p.deadline_ms == 123 for p in shares)
    assert not group_pace(sample_plan(), sample_plan().tasks).limited


def test_the_spec_limit_and_window_reach_the_plan_and_a_budget_cuts_it():
    spec = parse_spec({**SPEC, "copy": {"max_bytes_per_second": 40_000_000, "max_records_per_second": 5000,
                                         "window": "4h"}}, "acme.yaml")
    positions = [PartitionPosition("orders", 0, None, 0, 100), PartitionPosition("orders", 1, 8, 0, 9)]
    plan = build_plan(spec, positions, "src-id", "dst-id", now_ms=1, deadline_ms=5000, records_budget=30)
    assert plan.rate_limit == RateLimit(40_000_000, 5000)
    assert (plan.window, plan.deadline_ms, plan.window_budget_records) == ("4h", 5000, 30)
    assert [(t.partition, t.start_offset, t.end_offset) for t in plan.tasks] == [(0, 0, 29), (1, 8, 9)]
    assert not plan.window_closed
    closed = build_plan(spec, positions, "src-id", "dst-id", now_ms=6000, deadline_ms=5000, records_budget=0)
    assert closed.is_empty and closed.window_closed and closed.summary()["window_closed"]
    unwindowed = build_plan(spec, positions, "src-id", "dst-id", now_ms=1)  # the promotion's final copy
    assert unwindowed.window is None and unwindowed.deadline_ms is None and unwindowed.rate_limit.bytes_per_second


def test_the_report_says_why_each_partition_and_the_batch_stopped_and_the_overrun():
    plan = dataclasses.replace(sample_plan(), window="4h", deadline_ms=2000, max_records_per_second=50,
                               planned_at_ms=0)
    # orders-0: [0, 7) planned, source end 7, copied all -> caught up; orders-1 stopped at the deadline at 200
    rows = [dict(row(0, 7), planned_end=7, throttled_s=1.5),
            dict(row(1, 190), planned_start=10, planned_end=500, next_upstream_offset=200, stopped_at_deadline=True,
                 throttled_s=2.0)]
    report = build_report(plan, rows, {"orders:0": 0, "orders:1": 300}, 0, 3250)
    assert [p["stop_reason"] for p in report["partitions"]] == ["caught_up", "deadline"]
    assert (report["stop_reason"], report["overrun_s"], report["throttled_s"]) == ("deadline", 1.25, 3.5)
    lines = report_lines(report)
    assert any(line.startswith("stopped: deadline; window 4h ended 1970-01-01T00:00:02Z, overrun 1.25 s; rate "
                               "limit 50 records/s, waited 3.5 s on it") and "left 300 offsets in 1 partitions"
               in line for line in lines)
    assert "  orders-1 stopped at the deadline at offset 200: left 300 of this batch's offsets, lag 300 " \
           "(the next run resumes there)" in lines
    # a range the plan held short of the source end (a cap, the window's sizing) stopped at a limit
    short = build_report(plan, [dict(row(0, 5), planned_end=5)], {"orders:0": 2}, 0, 1000)
    assert short["partitions"][0]["stop_reason"] == "limit" and short["stop_reason"] == "limit"
    assert short["overrun_s"] == 0
    closed = build_report(dataclasses.replace(plan, tasks=(), planned_at_ms=5000), [], {}, 5000, 6000)
    assert (closed["stop_reason"], closed["overrun_s"]) == ("deadline", 0.0)
    plain = build_report(sample_plan(), [dict(row(0, 7), planned_end=7)], {}, 0, 10)
    assert plain["stop_reason"] == "caught_up" and plain["overrun_s"] is None and plain["deadline_ms"] is None
    assert report_lines(plain)[1] == "stopped: caught up"


def test_a_partitions_share_of_the_window_stops_it_earlier_but_never_later_than_the_deadline():
    clock = Clock(100.0)
    pace = BatchPace(RateLimit(), deadline_ms=110_000, clock=clock, wall=clock)
    assert not pace.past_deadline(105_000)
    clock.now = 105.0
    assert pace.past_deadline(105_000) and not pace.past_deadline()
    assert not pace.past_deadline(200_000)  # a share past the window's deadline is cut to it
    clock.now = 110.0
    assert pace.past_deadline(200_000) and pace.now_ms() == 110_000
