"""A batch's window (``core.batches.batch_window``): parsing, the deadline (an end time that has passed, across
midnight, in a zone with summer time), the measured rate, the fair split of a budget, and why a batch stopped."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.batches.batch_planning import PartitionPosition, plan_ranges
from kafka_ferry.core.batches.batch_window import (
    STOP_CAUGHT_UP,
    STOP_DEADLINE,
    STOP_LIMIT,
    UnknownTimezone,
    Window,
    batch_stop_reason,
    fair_split,
    parse_window,
    records_budget,
    window_deadline,
    window_length_s,
)
from kafka_ferry.core.batches.copy_rate import measured_rate, sizing_rate
from kafka_ferry.core.batches.rate_limit import RateLimit
from kafka_ferry.core.common.failures import retry_cannot_help


def ms(text: str, tz: str = "UTC") -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp() * 1000)


@pytest.mark.parametrize(("text", "window"), [
    ("4h", Window(seconds=4 * 3600)), ("90min", Window(seconds=5400)), ("1h30min", Window(seconds=5400)),
    ("45s", Window(seconds=45)), (" 2h ", Window(seconds=7200)), ("05:00", Window(end=(5, 0))),
    ("23:59", Window(end=(23, 59))), ("00:00", Window(end=(0, 0))),
])
def test_a_window_is_a_duration_or_an_end_time(text, window):
    assert parse_window(text) == window


@pytest.mark.parametrize("text", ["", "4", "4 hours", "24:00", "5:00", "05:60", "0h", "169h", "-1h", "4h4h",
                                  "1d", "05:00:00", "h"])
def test_anything_else_is_refused_saying_what_is_accepted(text):
    with pytest.raises(ValueError, match="window"):
        parse_window(text)


def test_a_duration_counts_from_the_run_due_time():
    assert window_deadline(Window(seconds=5400), ms("2026-11-25T01:00:00")) == ms("2026-11-25T02:30:00")


def test_an_end_time_is_the_first_one_after_the_due_time():
    nightly = parse_window("05:00")
    assert window_deadline(nightly, ms("2026-11-25T01:00:00")) == ms("2026-11-25T05:00:00")
    # crosses midnight: due at 23:00, ends at 05:00 the next day
    assert window_deadline(nightly, ms("2026-11-25T23:00:00")) == ms("2026-11-26T05:00:00")
    # due exactly at the end time: the next day's (a window is never empty by construction)
    assert window_deadline(nightly, ms("2026-11-25T05:00:00")) == ms("2026-11-26T05:00:00")


def test_an_end_time_that_has_passed_when_planning_gives_no_budget():
    """A run due at 01:00 but planned at 06:00 (it waited): its 05:00 deadline has passed, it copies nothing."""
    deadline = window_deadline(parse_window("05:00"), ms("2026-11-25T01:00:00"))
    assert records_budget(1000.0, ms("2026-11-25T06:00:00"), deadline) == 0
    assert records_budget(None, ms("2026-11-25T06:00:00"), deadline) == 0
    assert records_budget(None, ms("2026-11-25T02:00:00"), deadline) is None  # no estimate: the deadline bounds it
    assert records_budget(1000.0, ms("2026-11-25T04:00:00"), deadline) == int(1000 * 3600 * 0.9)
    # the window's last instant at a slow rate: still open, so at least one record is planned (an empty plan would
    # report "caught up" with lag left); the deadline stops the copy
    assert records_budget(0.5, deadline - 1000, deadline) == 1


def test_an_end_time_is_wall_clock_time_in_the_dag_timezone_across_summer_time():
    # Europe/Paris: clocks go back at 03:00 on 2026-10-25; 05:00 local is 04:00 UTC that day, 03:00 UTC before
    nightly = parse_window("05:00")
    assert window_deadline(nightly, ms("2026-10-24T23:30:00", "Europe/Paris"), "Europe/Paris") == ms(
        "2026-10-25T04:00:00")
    assert window_deadline(nightly, ms("2026-10-23T23:30:00", "Europe/Paris"), "Europe/Paris") == ms(
        "2026-10-24T03:00:00")
    assert window_deadline(nightly, ms("2026-11-25T01:00:00"), "utc") == ms("2026-11-25T05:00:00")
    with pytest.raises(UnknownTimezone, match="IANA") as raised:
        window_deadline(nightly, 0, "+01:00")
    assert retry_cannot_help(raised.value)
    assert window_deadline(parse_window("1h"), 0, "+01:00") == 3600 * 1000  # a duration needs no zone


def test_an_end_time_shown_twice_when_clocks_go_back_ends_a_run_due_between_them_at_the_second():
    # America/New_York, 2025-11-02: 01:30 comes at 05:30 UTC (EDT), then again at 06:30 UTC (EST)
    window = parse_window("01:30")
    due = ms("2025-11-02T06:00:00")  # 01:00 EST, after the first 01:30
    assert window_deadline(window, due, "America/New_York") == ms("2025-11-02T06:30:00")  # not the next day's
    assert window_deadline(window, ms("2025-11-02T05:00:00"), "America/New_York") == ms("2025-11-02T05:30:00")
    # spring forward, 2026-03-08: 02:30 does not exist; its end stays where it was (03:30 EDT, 07:30 UTC)
    assert window_deadline(parse_window("02:30"), ms("2026-03-08T06:00:00"), "America/New_York") == ms(
        "2026-03-08T07:30:00")


@given(due=st.integers(0, 4 * 10**12), hour=st.integers(0, 23), minute=st.integers(0, 59),
       tz=st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]))
def test_an_end_time_deadline_is_within_a_day_after_the_due_time(due, hour, minute, tz):
    deadline = window_deadline(Window(end=(hour, minute)), due, tz)
    assert due < deadline <= due + 25 * 3600 * 1000  # a summer-time day is 25 h long
    local = datetime.fromtimestamp(deadline / 1000, ZoneInfo(tz))
    # the wall-clock end time, unless a summer-time gap skipped it (then just after it)
    assert (local.hour, local.minute) == (hour, minute) or local.hour == (hour + 1) % 24 or tz == "Australia/Lord_Howe"


@pytest.mark.parametrize("window,schedule,seconds", [("05:00", "0 1 * * *", 4 * 3600.0),
                                                     ("05:00", "30 23 * * *", 5.5 * 3600),
                                                     ("05:00", "0 5 * * *", 86400.0),
                                                     ("05:00", "@daily", None), ("05:00", "*/5 * * * *", None),
                                                     ("05:00", None, None), ("4h", "@hourly", 14400.0),
                                                     ("1h30min", None, 5400.0)])
def test_a_windows_length_for_the_eta(window, schedule, seconds):
    # an end time is as long as the daily schedule leaves it; a duration is its own length
    assert window_length_s(parse_window(window), schedule) == seconds


def test_the_measured_rate_is_the_newest_busy_batches_that_copied_something_end_to_end():
    batches = [{"records_copied": 100, "bytes_copied": 1000, "duration_s": 10.0, "finished_at_ms": i,
                "stop_reason": "limit"} for i in range(10)]
    batches += [{"records_copied": 0, "bytes_copied": 0, "duration_s": 1.0, "finished_at_ms": 99,
                 "stop_reason": "deadline"},  # the window had closed
                {"records_copied": 4000, "bytes_copied": 40000, "duration_s": 10.0, "finished_at_ms": 50,
                 "stop_reason": "deadline"},
                {"records_copied": 10, "bytes_copied": 100, "duration_s": 4.0, "finished_at_ms": 98,
                 "stop_reason": "caught_up"},  # copied what there was: says nothing about the rate
                {"status": "succeeded", "records_copied": 5, "finished_at_ms": 60}]  # an older record
    rate = measured_rate(batches, last=2)
    assert rate is not None
    assert (rate.records, rate.bytes, rate.seconds, rate.batches) == (4100, 41000, 20.0, 2)
    assert rate.records_per_second == 205 and rate.mean_record_bytes == 10
    assert measured_rate([]) is None
    assert measured_rate([{"records_copied": 10, "bytes_copied": 1, "duration_s": 4.0,
                           "stop_reason": "caught_up"}]) is None


def test_the_sizing_rate_is_the_measured_one_never_above_the_limit():
    rate = measured_rate([{"records_copied": 1000, "bytes_copied": 1_000_000, "duration_s": 1.0,
                           "stop_reason": "limit"}])
    assert sizing_rate(rate, RateLimit()) == 1000
    assert sizing_rate(rate, RateLimit(records_per_second=200)) == 200
    assert sizing_rate(rate, RateLimit(bytes_per_second=100_000)) == 100  # 1000-byte records
    assert sizing_rate(None, RateLimit(records_per_second=50)) == 50
    assert sizing_rate(None, RateLimit(bytes_per_second=50)) is None  # record size unknown yet
    assert sizing_rate(None, RateLimit()) is None


@given(needs=st.lists(st.integers(0, 10**6), max_size=30), budget=st.integers(0, 10**7))
def test_a_budget_is_split_max_min_fairly(needs, budget):
    shares = fair_split(needs, budget)
    assert len(shares) == len(needs)
    assert sum(shares) <= budget
    assert all(0 <= s <= n for s, n in zip(shares, needs, strict=True))
    short = [s for s, n in zip(shares, needs, strict=True) if s < n]
    if short:  # someone got less than it needs: the budget is used up and nobody got more than one above it
        assert sum(shares) == budget
        assert max(shares) <= min(short) + 1
    else:
        assert shares == list(needs)


def test_a_window_budget_cuts_the_planned_ranges_fairly():
    positions = [PartitionPosition("t", p, 0, 0, end) for p, end in enumerate([1000, 10, 500])]
    _, ranges, _ = plan_ranges(positions, 10_000, records_budget=400)
    assert {(r.partition, r.start_offset, r.end_offset) for r in ranges} == {(0, 0, 195), (1, 0, 10), (2, 0, 195)}
    full_id, full, _ = plan_ranges(positions, 10_000)
    assert sum(r.offset_count for r in full) == 1510
    assert plan_ranges(positions, 10_000, records_budget=0)[1] == ()  # the window has closed: nothing planned
    assert plan_ranges(positions, 10_000, records_budget=10**6)[0] == full_id  # a budget that cuts nothing


def test_a_batch_stops_at_the_deadline_if_any_partition_did():
    assert batch_stop_reason([STOP_CAUGHT_UP, STOP_LIMIT, STOP_DEADLINE]) == STOP_DEADLINE
    assert batch_stop_reason([STOP_CAUGHT_UP, STOP_LIMIT]) == STOP_LIMIT
    assert batch_stop_reason([STOP_CAUGHT_UP]) == STOP_CAUGHT_UP
    assert batch_stop_reason([]) == STOP_CAUGHT_UP
    assert batch_stop_reason([], window_closed=True) == STOP_DEADLINE


def test_the_nightly_window_example_of_the_spec_reference_is_a_valid_spec():
    import yaml

    from kafka_ferry.cli.spec_reference import FOOTER
    from kafka_ferry.core.specs.spec import parse_spec

    example = yaml.safe_load(FOOTER.split("```yaml")[1].split("```")[0])
    spec = parse_spec({"name": "orders-eu", "tenant": "acme", "source": {"connection_id": "a", "alias": "a"},
                       "destination": {"connection_id": "b", "alias": "b"}, "topics": {"include": ["o"]},
                       **example}, "nightly.yaml")
    assert spec.copy_settings.rate_limit == RateLimit(bytes_per_second=40_000_000)
    assert spec.copy_settings.window is not None
    assert parse_window(spec.copy_settings.window) == Window(end=(5, 0))
    assert spec.timeouts.copy_seconds > 4 * 3600
