"""The ETA counted in batches (`core.batches.backlog_eta.batch_eta`, `batch_cost`, `counted_eta`): per-partition caps,
the window, the fixed cost per batch and the producers, which a rate alone ignores ("lag 0 in 1 s" while each
batch of 400 records per partition took 65-90 s)."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kafka_ferry.core.batches.backlog_eta import (
    BatchCost,
    RunPoint,
    batch_cost,
    batch_eta,
    batch_gap_s,
    estimate,
    inflow_rate,
)


def fitted(points: list[RunPoint]) -> BatchCost:
    """The batch cost of runs that give one (``batch_cost`` is None for none or only empty ones)."""
    cost = batch_cost(points)
    assert cost is not None
    return cost

def test_the_issue_case_counts_capped_batches_and_their_fixed_cost():
    # 19 partitions, 5,519 records left (about 290 each), 400 per partition per batch, 70 s per batch mostly fixed
    lags = [290] * 18 + [299]
    counted = batch_eta(lags, records_per_s=2_000.0, fixed_s=65.0, cap_per_partition=400)
    assert counted.batches == 1 and counted.seconds == pytest.approx(65.0 + sum(lags) / 2_000.0)
    # 1,000 in one partition: three batches of at most 400, each paying its 65 s
    counted = batch_eta([1_000, 10], records_per_s=2_000.0, fixed_s=65.0, cap_per_partition=400)
    assert counted.batches == 3
    assert counted.seconds == pytest.approx(3 * 65.0 + (410 + 400 + 200) / 2_000.0)


def test_producers_between_batches_add_batches_and_a_schedule_spaces_them():
    no_inflow = batch_eta([1_000], records_per_s=1_000.0, fixed_s=10.0, cap_per_partition=400)
    with_inflow = batch_eta([1_000], records_per_s=1_000.0, fixed_s=10.0, cap_per_partition=400, inflow_per_s=5.0)
    assert no_inflow.batches == 3 and with_inflow.batches == 3
    assert with_inflow.seconds is not None and no_inflow.seconds is not None
    assert with_inflow.seconds > no_inflow.seconds
    scheduled = batch_eta([1_000], records_per_s=1_000.0, fixed_s=10.0, cap_per_partition=400, interval_s=300.0)
    assert scheduled.seconds == pytest.approx(2 * 300.0 + 10.0 + 200 / 1_000.0)  # two cycles, then the last batch
    never = batch_eta([1_000], records_per_s=1_000.0, fixed_s=10.0, cap_per_partition=400, inflow_per_s=41.0)
    assert never.batches is None and "never catch up" in never.reason  # 41/s x ~10.4 s > 400 a batch
    # the batch that copies all a partition holds at its start ends the count: what came in meanwhile is its lag
    assert batch_eta([100], records_per_s=1_000.0, fixed_s=10.0, cap_per_partition=400, inflow_per_s=30.0).batches == 1


def test_a_window_bounds_what_a_batch_copies_after_its_fixed_cost():
    # 100 s window, 40 s fixed: 60 s of copying at 10 records/s = 600 records a batch, shared by the partitions
    counted = batch_eta([900, 900], records_per_s=10.0, fixed_s=40.0, window_s=100.0)
    assert counted.batches == 3
    closed = batch_eta([900], records_per_s=10.0, fixed_s=40.0, window_s=30.0)
    assert closed.batches is None and "no batch copies anything" in closed.reason


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5_000), min_size=1, max_size=8), st.floats(1.0, 5_000.0), st.floats(0.0, 120.0),
       st.integers(1, 2_000))
def test_batches_are_at_least_the_largest_lag_over_the_cap_and_a_larger_cap_never_needs_more(
        lags, rate, fixed, cap):
    counted = batch_eta(lags, rate, fixed, cap_per_partition=cap)
    if sum(lags) == 0:
        assert counted.batches == 0 and counted.seconds == 0
        return
    assert counted.batches == max(math.ceil(lag / cap) for lag in lags)  # no producers: exactly this many
    assert counted.seconds == pytest.approx(counted.batches * fixed + sum(lags) / rate)
    wider = batch_eta(lags, rate, fixed, cap_per_partition=cap * 2).batches
    assert wider is not None and counted.batches is not None and wider <= counted.batches


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 5_000), min_size=1, max_size=8), st.floats(1.0, 1_000.0), st.floats(0.0, 60.0),
       st.integers(1, 2_000), st.floats(0.0, 5.0))
def test_producers_never_shorten_the_eta(lags, rate, fixed, cap, inflow):
    alone = batch_eta(lags, rate, fixed, cap_per_partition=cap)
    busy = batch_eta(lags, rate, fixed, cap_per_partition=cap, inflow_per_s=inflow)
    if busy.seconds is not None:
        assert alone.seconds is not None and alone.batches is not None and busy.batches is not None
        assert busy.seconds >= alone.seconds - 1e-6 and busy.batches >= alone.batches


def _point(i, records, duration, stop="caught_up"):
    return RunPoint(f"b{i}", i * 100_000, duration, records, records * 100, records, 0, stop)


def test_the_fixed_cost_is_fitted_from_batches_of_different_sizes_and_taken_whole_from_batches_of_one():
    cost = fitted([_point(1, 1_000, 70.0), _point(2, 3_000, 90.0), _point(3, 5_000, 110.0)])
    assert cost.fixed_s == pytest.approx(60.0) and cost.records_per_s == pytest.approx(100.0)
    same = fitted([_point(1, 7_600, 95.0), _point(2, 7_600, 65.0), _point(3, 7_600, 90.0)])
    assert same.fixed_s == pytest.approx(77.5) and math.isinf(same.records_per_s)  # the first batch aside
    assert batch_cost([]) is None and batch_cost([_point(1, 0, 5.0)]) is None


def test_the_estimate_puts_the_counted_eta_first_and_says_batches():
    points = [_point(0, 7_600, 120.0, "limit"), _point(1, 7_600, 65.0, "limit"), _point(2, 7_600, 90.0, "limit")]
    est = estimate(5_519, points, partition_lags=[290] * 18 + [299], cap_per_partition=400)
    first = est.etas[0]
    # the first batch (120 s: one-time costs) set aside: 65 and 90 s; the batches ended 100 s apart, so 35 and 10 s
    # passed between them, 22.5 s in the median, before the next one too
    assert first.label.startswith("counting batches (at most 400 records per partition each, 1 min per batch, the "
                                  "median of 2 batches of about 7,600 records, 22 s between batches)")
    assert first.batches == 1 and first.seconds == pytest.approx(22.5 + 77.5)
    assert "lag 0 in 1 min, after 1 batch" in est.sentence
    without = estimate(5_519, points)
    assert not without.etas[0].label.startswith("counting batches")


def test_the_time_between_batches_is_the_median_gap_and_every_batch_to_come_pays_it():
    # batches of 1 s ending 1.25 s apart (one slow start of 3 s among them): 0.25 s between batches
    ends = [0, 1_250, 2_500, 6_500, 7_750, 9_000]
    points = [RunPoint(f"b{i}", end, 1.0, 400, 40_000, 800, 400, "limit") for i, end in enumerate(ends)]
    assert batch_gap_s(points) == pytest.approx(0.25)
    assert batch_gap_s(points[:1]) == 0.0 and batch_gap_s([]) == 0.0
    # what the ETA bench found: ten batches of 1 s predicted 10 s where 12.4 s passed; counting the gap closes it
    alone = batch_eta([4_000], records_per_s=math.inf, fixed_s=1.0, cap_per_partition=400)
    paced = batch_eta([4_000], records_per_s=math.inf, fixed_s=1.0, cap_per_partition=400, gap_s=0.25)
    assert alone.batches == paced.batches == 10
    assert alone.seconds == pytest.approx(10.0) and paced.seconds == pytest.approx(12.5)
    # with a schedule the gap is the wait for the next run: the interval is met, not added to
    scheduled = batch_eta([1_000], records_per_s=1_000.0, fixed_s=10.0, cap_per_partition=400, interval_s=300.0,
                          gap_s=289.6)
    assert scheduled.seconds == pytest.approx(289.6 + 2 * 300.0 + 10.2)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 5_000), min_size=1, max_size=8), st.floats(1.0, 1_000.0), st.floats(0.0, 60.0),
       st.integers(1, 2_000), st.floats(0.0, 5.0), st.floats(0.0, 30.0))
def test_time_between_batches_never_shortens_the_eta_and_adds_exactly_one_gap_a_batch_without_producers(
        lags, rate, fixed, cap, inflow, gap):
    without = batch_eta(lags, rate, fixed, cap_per_partition=cap, inflow_per_s=inflow)
    paced = batch_eta(lags, rate, fixed, cap_per_partition=cap, inflow_per_s=inflow, gap_s=gap)
    if paced.seconds is not None and without.seconds is not None:
        assert paced.batches is not None and without.batches is not None
        assert paced.seconds >= without.seconds - 1e-6 and paced.batches >= without.batches
    quiet, quiet_paced = (batch_eta(lags, rate, fixed, cap_per_partition=cap),
                          batch_eta(lags, rate, fixed, cap_per_partition=cap, gap_s=gap))
    assert quiet_paced.batches == quiet.batches
    assert quiet_paced.seconds == pytest.approx(quiet.seconds + quiet.batches * gap)


# --- a batch's run, not only its copy: what spark-submit's start costs (the issue's 65-90 s batches) -------------

def _run(i, end_s, duration, run, records=7_600, before=20_000, after=13_000, moved=7_600):
    """A capped batch that ended at ``end_s``, copied for ``duration`` s and was planned ``run`` s before its end."""
    return RunPoint(f"b{i}", int(end_s * 1000), duration, records, records * 200, before, after, "limit", moved,
                    int((end_s - run) * 1000))


def test_the_fixed_cost_is_the_run_from_plan_to_end_not_only_the_copy_inside_the_engine():
    # the copy inside spark-submit took 2 s; the run from the plan took 60 s (the JVM, the SparkContext)
    first = _run(1, 1_000.0, 2.0, 60.0)
    assert first.run_s == pytest.approx(60.0)
    assert fitted([first]).fixed_s == pytest.approx(60.0)  # after ONE batch, not only after two
    # a record kept before the plan time was: the copy's duration stands in, as before
    legacy = RunPoint("old", 1_000_000, 2.0, 7_600, 0, 20_000, 13_000, "limit", 7_600)
    assert legacy.run_s == 2.0 and fitted([legacy]).fixed_s == pytest.approx(2.0)
    # the gap is what is left between a batch's end and the next plan: 70 s apart, 60 s runs -> 10 s
    points = [_run(1, 1_000.0, 2.0, 60.0, before=60_800, after=53_200),
              _run(2, 1_070.0, 2.5, 60.0, before=53_200, after=45_600),
              _run(3, 1_140.0, 1.5, 60.0, before=45_600, after=38_000)]
    assert batch_gap_s(points) == pytest.approx(10.0)
    # 5 capped batches left (2,000 per partition at 400 each), no producers: gap + run each
    counted = estimate(38_000, points, partition_lags=[2_000] * 19, cap_per_partition=400).etas[0]
    assert counted.batches == 5 and counted.seconds == pytest.approx(5 * 70.0)


def test_one_slow_start_moves_the_median_not_every_batch_to_come():
    runs = [_run(i, 200.0 * i, 2.0, run) for i, run in enumerate([60.0, 61.0, 180.0, 59.0, 60.0, 62.0], start=1)]
    assert fitted(runs).fixed_s == pytest.approx(61.0)  # the mean would say 84 s


def test_batches_a_few_records_apart_are_not_fitted_into_a_rate():
    # capped batches of 7,600 and one of 7,590: a fit would turn the seconds' noise into a rate
    points = [_point(1, 7_600, 66.0), _point(2, 7_600, 65.0), _point(3, 7_590, 64.0), _point(4, 7_600, 90.0)]
    cost = fitted(points)
    assert cost.fixed_s == pytest.approx(65.0) and math.isinf(cost.records_per_s)


def test_the_producers_rate_is_known_after_the_first_batch_from_its_plan_to_its_end():
    # planned with 20,000 left, moved 7,600 in its 60 s, 13,600 left: the producers added 1,200 = 20 records/s
    only = _run(1, 1_000.0, 2.0, 60.0, before=20_000, after=13_600, moved=7_600)
    assert inflow_rate([only]) == pytest.approx(20.0)
    legacy = RunPoint("old", 1_000_000, 2.0, 7_600, 0, 20_000, 13_600, "limit", 7_600)
    assert inflow_rate([legacy]) is None
    # with two batches the span between their ends decides, as before
    second = _run(2, 1_070.0, 2.0, 60.0, before=14_800, after=8_600, moved=7_600)
    assert inflow_rate([only, second]) == pytest.approx((8_600 - 13_600 + 7_600) / 70.0)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 30.0), st.floats(0.0, 120.0), st.floats(0.0, 60.0)), min_size=1,
                max_size=12))
def test_the_fixed_cost_of_capped_batches_is_the_median_run_and_the_gap_the_median_rest(batches):
    # (copy seconds, engine start and planning, wait before the next plan) per batch, every batch capped the same
    points: list[RunPoint] = []
    end = 1_000.0
    for i, (copy, start, wait) in enumerate(batches):
        end += wait + start + copy
        points.append(_run(i, end, copy, start + copy))
    runs = [p.run_s for p in (points[1:] if len(points) > 1 else points)[-10:]]  # the first batch aside
    cost = fitted(points)
    assert math.isinf(cost.records_per_s)
    assert cost.fixed_s == pytest.approx(statistics.median(runs), abs=2e-3)
    assert min(runs) - 1e-6 <= cost.fixed_s <= max(runs) + 1e-6
    gaps = [wait for _, _, wait in batches[1:]][-10:]  # ends kept in ms: 1 ms per batch of rounding
    assert batch_gap_s(points) == pytest.approx(statistics.median(gaps) if gaps else 0.0, abs=1e-2)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.integers(2, 25), st.integers(1, 2_000), st.floats(1.0, 300.0), st.floats(0.0, 60.0))
def test_a_steady_capped_catch_up_is_predicted_exactly_from_its_measured_runs(
        per_partition_batches, partitions, cap, run, gap):
    # what the bench measures, without noise: every batch runs `run` s, `gap` s apart, no producers; the ETA after
    # any batch equals the time the rest really take
    total = per_partition_batches * cap
    points: list[RunPoint] = []
    end, left = 1_000.0, total
    while left > 0:
        end += gap + run
        moved = min(cap, left)
        points.append(_run(len(points), end, run / 2, run, records=moved * partitions, before=left * partitions,
                           after=(left - moved) * partitions, moved=moved * partitions))
        left -= moved
    for n in range(1, len(points)):
        lag = total - min(total, n * cap)
        counted = estimate(lag * partitions, points[:n], partition_lags=[lag] * partitions,
                           cap_per_partition=cap).etas[0]
        assert counted.batches == len(points) - n
        actual = points[-1].finished_at_ms / 1000 - points[n - 1].finished_at_ms / 1000
        expected_gap_error = gap if n == 1 else 0.0  # after one batch no gap is measured yet
        # ends are kept in ms: a ms of rounding per batch
        assert counted.seconds == pytest.approx(actual - expected_gap_error * (len(points) - n), rel=1e-3, abs=0.01)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 5_000), min_size=1, max_size=8), st.floats(1.0, 500.0), st.floats(0.0, 60.0),
       st.floats(1.0, 600.0), st.one_of(st.none(), st.integers(1, 2_000)))
def test_a_window_leaves_each_batch_what_its_fixed_cost_does_not_take_and_a_wider_one_never_needs_more(
        lags, rate, fixed, beyond_fixed, cap):
    window = fixed + beyond_fixed  # the copy gets `beyond_fixed` seconds of each window
    counted = batch_eta(lags, rate, fixed, cap_per_partition=cap, window_s=window)
    if sum(lags) == 0:
        assert counted.batches == 0
        return
    budget = beyond_fixed * rate
    assume(sum(lags) / budget < 5_000)  # beyond core.batches.backlog_eta.MAX_BATCHES the answer is "never"
    by_window = math.ceil(sum(lags) / budget - 1e-9)
    by_cap = max(math.ceil(lag / cap) for lag in lags) if cap else 1
    assert counted.batches is not None and max(by_window, by_cap) <= counted.batches
    if cap is None:  # the window alone: partitions share each batch's budget, so they all end in the same batch
        assert counted.batches == by_window
        assert counted.seconds == pytest.approx(counted.batches * fixed + sum(lags) / rate)
    wider = batch_eta(lags, rate, fixed, cap_per_partition=cap, window_s=window * 2)
    assert wider.batches is not None and wider.batches <= counted.batches


def test_the_first_batch_counts_only_until_a_second_one_ran():
    # Spark Connect on the ETA bench: the migration's first batch opened its session (13 s), the later ones 2-4 s
    first = _run(1, 1_000.0, 13.4, 17.8)
    assert fitted([first]).fixed_s == pytest.approx(17.8)  # all there is
    later = [first, _run(2, 1_003.0, 2.0, 2.2), _run(3, 1_007.0, 3.4, 3.6)]
    assert fitted(later).fixed_s == pytest.approx(2.9)
    # a history whose oldest kept batch is not the migration's first: only the first one is set aside
    assert fitted(later[1:]).fixed_s == pytest.approx(3.6)
    assert fitted([_point(0, 0, 1.0), *later[1:]]).fixed_s == pytest.approx(2.9)  # the first copied nothing
