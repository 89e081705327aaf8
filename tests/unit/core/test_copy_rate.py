"""One copy rate (``core.batches.copy_rate``) for the window's sizing and the ETA: busy batches, per second of batch
time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.batches.backlog_eta import RunPoint, estimate
from kafka_ferry.core.batches.copy_rate import measured_rate, sizing_rate
from kafka_ferry.core.batches.rate_limit import RateLimit


def test_a_batch_that_caught_up_moves_neither_the_sizing_nor_the_eta():
    busy = RunPoint("b0", 1_000, 10.0, 10_000, 10_000_000, 50_000, 40_000, "deadline")
    # ten records after a four-second start: says how much was new, not how fast the copy goes
    trickle = RunPoint("b1", 90_000_000, 4.0, 10, 10_000, 10, 0, "caught_up")
    est = estimate(40_000, [busy, trickle])
    assert est.copy_records_per_s == 1000.0  # not 10,010 / 14 s
    assert est.etas[0].records_per_s == 1000.0
    assert sizing_rate(measured_rate([vars(busy), vars(trickle)]), RateLimit()) == 1000.0


def test_only_caught_up_batches_give_no_rate_and_say_why():
    trickle = RunPoint("b1", 90_000_000, 4.0, 10, 10_000, 10, 0, "caught_up")
    est = estimate(500, [trickle])
    assert est.copy_records_per_s is None and est.etas[0].seconds is None
    assert "caught up" in est.rate_reason and "no rate measured yet" in est.etas[0].sentence


@given(st.lists(st.tuples(st.integers(0, 10**6), st.floats(0.1, 1000),
                          st.sampled_from(["limit", "deadline", "caught_up", None])), max_size=12))
def test_the_eta_and_the_window_read_the_same_rate_from_the_same_batches(rows):
    points = [RunPoint(f"b{i}", (i + 1) * 60_000, s, c, c * 700, c + 5, 5, stop)
              for i, (c, s, stop) in enumerate(rows)]
    sized = sizing_rate(measured_rate(vars(p) for p in points), RateLimit())
    eta_rate = estimate(5, points).copy_records_per_s
    assert (sized is None) == (eta_rate is None)
    if sized is not None:
        assert eta_rate == round(sized, 1)
