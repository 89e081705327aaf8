"""Fair in time over windows (``core.batches.batch_window.lane_order`` / ``share_deadline``): a lane copies its
partitions one after another, and no partition with lag goes without progress in a window, the first window (no measured
rate, no budget: the deadline alone bounds it) included.

The simulation is the copier's loop (``copy.partition_copier._copy_range``): before each chunk it checks its
deadline (the window's, or its share of it), then copies one chunk, which may take up to ``c`` ms; a range ends
when it is copied. Producers add records between windows.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.batches.batch_window import lane_order, share_deadline


def harmonic(n: int) -> Fraction:
    return sum((Fraction(1, j) for j in range(1, n + 1)), Fraction(0))


def run_window(lags: list[int], chunk_records: list[int], chunk_ms: list[int], start: int, deadline: int,
               shares: bool = True) -> tuple[list[int], int]:
    """One window of one lane: (records each partition copied, when the lane ended)."""
    planned = [i for i, lag in enumerate(lags) if lag > 0]  # the planner plans only partitions with lag
    order = [planned[k] for k in lane_order([lags[i] for i in planned])] if shares else planned
    copied = [0] * len(lags)
    now = start
    for k, i in enumerate(order):
        stop = share_deadline(now, deadline, len(order) - k) if shares else deadline
        while copied[i] < lags[i] and now < stop:  # the deadline check between two chunks
            copied[i] += min(chunk_records[i], lags[i] - copied[i])
            now += chunk_ms[i]
    return copied, now


partition = st.tuples(st.integers(0, 10**6), st.integers(1, 500), st.integers(1, 50), st.integers(0, 10**5))


@given(partitions=st.lists(partition, min_size=1, max_size=16), slack=st.integers(0, 10**6),
       windows=st.integers(1, 6))
def test_every_partition_with_lag_progresses_in_every_window(partitions, slack, windows):
    lags = [p[0] for p in partitions]
    chunk_records, chunk_ms, inflow = [p[1] for p in partitions], [p[2] for p in partitions], [p[3] for p in partitions]
    n, c = len(partitions), max(chunk_ms)
    # the bound of share_deadline: the window the lane has left once started, > n * c * H(n-1) (+1 ms of rounding
    # per share)
    lane_time = int(n * (c + 1) * harmonic(n - 1)) + n + 1 + slack
    for w in range(windows):
        start = w * 86_400_000
        deadline = start + lane_time
        copied, ended = run_window(lags, chunk_records, chunk_ms, start, deadline)
        for i, lag in enumerate(lags):
            assert lag == 0 or copied[i] > 0, f"window {w}: partition {i} with lag {lag} copied nothing"
            assert copied[i] <= lag
        assert ended < deadline + c  # a clean stop: at most one chunk past the deadline
        lags = [lag - done + added for lag, done, added in zip(lags, copied, inflow, strict=True)]


@given(needs=st.lists(st.integers(1, 10**4), min_size=1, max_size=12), window=st.integers(1, 10**6))
def test_a_lane_that_needs_less_than_the_window_copies_everything(needs, window):
    # shares cost nothing when the time suffices: a partition finishing early hands its time on
    total = sum(needs)  # one record per ms, one record per chunk
    copied, _ = run_window(needs, [1] * len(needs), [1] * len(needs), 0, total + window)
    assert copied == needs


def test_without_shares_the_first_window_starves_the_lanes_later_partitions():
    # what the copier did before: the deadline alone, the plan's order; the same partitions last in every window
    lags = [10_000, 10_000, 10_000]
    copied, _ = run_window(lags, [100] * 3, [10] * 3, 0, 1000, shares=False)
    assert copied[0] > 0 and copied[1:] == [0, 0]
    shared, _ = run_window(lags, [100] * 3, [10] * 3, 0, 1000)
    assert all(shared) and sum(shared) == sum(copied)  # as much copied, shared fairly


def test_share_deadline_splits_the_time_left_and_never_passes_the_deadline():
    assert share_deadline(0, 900, 3) == 300
    assert share_deadline(300, 900, 2) == 600
    assert share_deadline(600, 900, 1) == 900
    assert share_deadline(1000, 900, 4) == 900  # past the deadline: stop at once
    assert lane_order([5, 1, 5, 0]) == [3, 1, 0, 2]
    with pytest.raises(ValueError):
        share_deadline(0, 900, 0)
