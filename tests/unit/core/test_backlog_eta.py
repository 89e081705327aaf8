"""Backlog, rate and ETA: the issue's sentence, a reason on every answer, and the arithmetic's invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.batches.backlog_eta import (
    MAX_ETA_S,
    RunPoint,
    estimate,
    eta,
    format_duration,
    inflow_rate,
    limited_rate,
)
from kafka_ferry.core.batches.copy_rate import measured_rate


def point(i: int, copied: int, before: int, after: int, seconds: float = 10.0, at_s: int | None = None,
          size: int = 1000, stop: str = "limit") -> RunPoint:
    """A finished batch; busy (stopped at its limit) unless ``stop`` says otherwise."""
    return RunPoint(f"b{i}", (at_s if at_s is not None else i * 3600) * 1000, seconds, copied, copied * size,
                    before, after, stop)


def test_the_issues_sentence_at_a_limit_in_windows():
    # 35 MB/s of 1 KB records = 35,000 records/s; 9 h 20 min of that is the backlog
    backlog = 35_000 * (9 * 3600 + 20 * 60)
    fast = [point(0, 1_000_000, 2_000_000, 1_000_000, seconds=10)]  # measured 100,000 records/s, above the limit
    est = estimate(backlog, fast, max_bytes_per_s=35 * 1_000_000, window_s=4 * 3600)
    at_limit = est.etas[1]
    assert at_limit.sentence == "at 35 MB/s: lag 0 in 9 h 20 min, i.e. in 3 windows of 4 h"
    assert "configured limit" in at_limit.reason
    assert est.backlog_bytes == backlog * 1000 and est.bytes_estimated


def test_no_rate_before_the_first_batch_says_so():
    est = estimate(5000, [])
    assert est.etas[0].seconds is None
    assert "no rate measured yet" in est.etas[0].sentence
    assert est.backlog_bytes is None  # nothing measured, nothing sampled


def test_a_sampled_size_gives_bytes_and_a_limit_eta_before_the_first_batch():
    est = estimate(10_000, [], max_bytes_per_s=1_000_000, sampled_bytes_per_record=500.0)
    assert est.backlog_bytes == 5_000_000
    assert est.etas[1].seconds == pytest.approx(5.0)  # 2000 records/s, nothing measured to bound it


def test_backlog_growing_faster_than_the_copy_has_no_eta():
    # producers add 2000/s between batch ends one hour apart; the copy takes 100/s
    points = [point(0, 1000, 5000, 4000),
              RunPoint("b1", 3_600_000, 10.0, 1000, 1_000_000, 4000 + 7_200_000, 4000 + 7_200_000, "limit")]
    result = estimate(points[1].backlog_after, points)
    assert result.etas[0].seconds is None
    assert "backlog growing faster than the copy" in result.etas[0].reason


def test_a_limit_above_the_measured_rate_is_bounded_by_it():
    measured = measured_rate([{**vars(point(0, 1000, 2000, 1000, seconds=10))}])  # 100 records/s
    rate, label, reason = limited_rate(None, 1_000_000, 1000.0, measured)
    assert rate == pytest.approx(100) and "above the measured rate" in reason and label.startswith("at 1,000,000")


def test_a_bytes_limit_without_a_size_is_ignored_with_its_reason():
    rate, _, reason = limited_rate(1_000_000, None, None, None)
    assert rate is None and "no bytes per record measured yet" in reason


def test_caught_up():
    assert eta(0, "at the measured rate", None, None, 3600).sentence == "at the measured rate: lag is 0 (caught up)"


@pytest.mark.parametrize("seconds,text", [(0, "0 s"), (0.4, "< 1 s"), (59.4, "59 s"), (60, "1 min"), (3599, "59 min"),
                                          (3600, "1 h"), (9 * 3600 + 20 * 60, "9 h 20 min"),
                                          (86400 * 3 + 3600 * 4, "3 d 4 h")])
def test_durations_read_as_a_person_plans(seconds, text):
    assert format_duration(seconds) == text


@given(backlog=st.integers(1, 10**12), rate=st.floats(1, 1e7), inflow=st.floats(0, 1e7),
       window=st.floats(60, 86400))
def test_eta_drains_exactly_the_backlog_and_windows_cover_it(backlog, rate, inflow, window):
    result = eta(backlog, "x", rate, inflow, window)
    if rate <= inflow:
        assert result.seconds is None and "growing faster" in result.reason
        return
    if backlog / (rate - inflow) > MAX_ETA_S:
        assert result.seconds is None and "years away" in result.reason
        return
    assert result.seconds is not None and result.windows is not None
    assert result.seconds * (rate - inflow) == pytest.approx(backlog, rel=1e-9)
    assert (result.windows - 1) * window < result.seconds <= result.windows * window + 1e-6
    assert result.reason


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**7), st.floats(0.1, 1000),
                          st.sampled_from(["limit", "deadline", "caught_up", None])), min_size=1, max_size=12))
def test_rates_are_never_negative_and_the_eta_rate_uses_only_busy_batches_that_copied(rows):
    points = [RunPoint(f"b{i}", (i + 1) * 60_000, s, c, c * 100, after + c, after, stop)
              for i, (c, after, s, stop) in enumerate(rows)]
    est = estimate(points[-1].backlog_after, points)
    busy = [p for p in points if p.records_copied and p.stop_reason in ("limit", "deadline")][-5:]
    if not busy:
        assert est.copy_records_per_s is None and "no busy batch yet" in est.rate_reason
    else:
        assert est.copy_records_per_s == pytest.approx(sum(p.records_copied for p in busy)
                                                       / sum(p.duration_s for p in busy), abs=0.05 + 1e-9)
    inflow = inflow_rate(points)
    assert inflow is None if len(points) < 2 else (inflow is not None and inflow >= 0)


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_a_larger_backlog_never_reaches_zero_sooner(a, b):
    small, large = sorted((a, b))
    first, second = eta(small, "x", 1000.0, 10.0), eta(large, "x", 1000.0, 10.0)
    assert first.seconds is not None and second.seconds is not None
    assert first.seconds <= second.seconds
    assert math.isfinite(second.seconds)


def test_producers_writing_between_nightly_windows_are_counted():
    # 35,000 records/s while copying, producers 10,000/s around the clock: the copy outruns them while it runs,
    # but a 4 h window a day copies 504 M records and the producers add 864 M a day
    behind = eta(10**9, "at 35 MB/s", 35_000.0, 10_000.0, 4 * 3600, 86400)
    assert behind.seconds is None and "the windows fall behind" in behind.reason
    assert eta(10**9, "x", 35_000.0, 10_000.0, 4 * 3600).windows == 3  # what counting copy time alone promised
    # 2,000/s: the first window drains 475.2 M, each day after nets 331.2 M: 10^9 needs 3 windows
    ok = eta(10**9, "at 35 MB/s", 35_000.0, 2_000.0, 4 * 3600, 86400)
    assert ok.windows == 3 and ok.sentence.endswith("i.e. in 3 windows of 4 h, one every 1 d")


@given(backlog=st.integers(1, 10**9), rate=st.integers(2, 10**5), inflow=st.integers(0, 10**5),
       window=st.integers(60, 86400), idle=st.integers(1, 7 * 86400))
def test_windows_with_producers_between_them_match_a_window_by_window_drain(backlog, rate, inflow, window, idle):
    from fractions import Fraction

    cycle = window + idle
    result = eta(backlog, "x", float(rate), float(inflow), float(window), float(cycle))
    if rate <= inflow:
        assert result.seconds is None
        return
    left, windows = Fraction(backlog), 0
    while windows < 10_000:  # the drain, one window (and the gap after it) at a time
        windows += 1
        if left <= (rate - inflow) * window:
            break
        left += inflow * cycle - rate * window
    else:
        assert result.seconds is None or (result.windows is not None and result.windows >= 10_000)
        return
    if rate * window <= inflow * cycle and windows > 1:
        assert result.seconds is None and "fall behind" in result.reason
        return
    if (windows - 1) * cycle > MAX_ETA_S:
        assert result.seconds is None
        return
    assert result.windows == windows
    assert (windows - 1) * window < result.seconds <= windows * window * (1 + 1e-9)


def test_the_producers_rate_counts_offsets_a_batch_passed_without_copying_them():
    # producers add 10 offsets/s between batch ends a day apart; the second batch copied nothing new: everything it
    # moved past (1,000,000 offsets) an earlier attempt had already put on the destination (resumed)
    day = 86_400_000
    first = RunPoint("a", 0, 10.0, 1000, 1000, 0, 5_000_000, "deadline", offsets_progressed=1000)
    resumed = RunPoint("b", day, 10.0, 0, 0, 5_000_000, 5_000_000 + 864_000 - 1_000_000, "caught_up",
                       offsets_progressed=1_000_000)
    assert inflow_rate([first, resumed]) == pytest.approx(10.0)
    # a record kept before offsets were measured: the copied records stand in, as before
    legacy = RunPoint("b", day, 10.0, 0, 0, 5_000_000, 5_000_000 + 864_000 - 1_000_000, "caught_up")
    assert inflow_rate([first, legacy]) == 0.0


def test_an_eta_taken_as_a_window_ends_adds_the_producers_records_until_the_next_one():
    # 35,000 records/s in a 4 h window once a day, producers 2,000/s: the first window drains 475.2 M records.
    # Taken at a window's start, 400 M left fits in it; taken as a window ends, the next one opens 20 h later with
    # 400 M + 144 M = 544 M waiting, which one window cannot drain.
    at_start = eta(400_000_000, "x", 35_000.0, 2_000.0, 4 * 3600, 86400)
    assert at_start.windows == 1
    at_end = eta(400_000_000, "x", 35_000.0, 2_000.0, 4 * 3600, 86400, until_next_window_s=20 * 3600)
    assert at_end.windows == 2
    assert "144,000,000 the producers add in the 20 h before the next window" in at_end.reason
    # no cycle known: windows are counted in copy time and the wait is not modelled
    no_cycle = eta(400_000_000, "x", 35_000.0, 2_000.0, 4 * 3600, until_next_window_s=20 * 3600)
    assert no_cycle.windows == 1 and "before the next window" not in no_cycle.reason


@given(backlog=st.integers(1, 10**9), wait=st.integers(0, 86400))
def test_waiting_for_the_next_window_never_brings_lag_zero_sooner(backlog, wait):
    now = eta(backlog, "x", 35_000.0, 2_000.0, 4 * 3600, 86400)
    later = eta(backlog, "x", 35_000.0, 2_000.0, 4 * 3600, 86400, until_next_window_s=wait)
    assert later.windows is not None and now.windows is not None and later.windows >= now.windows
    assert later.seconds is not None and now.seconds is not None and later.seconds >= now.seconds
