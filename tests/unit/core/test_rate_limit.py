"""The copy rate limit's pure part (``core.batches.rate_limit``): the debt-based bucket holds the limit to within one
chunk, and the tasks' shares never add up to more than the migration's limit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.batches.rate_limit import RateLimit, Throttle, TokenBucket, share_of

chunks = st.lists(st.tuples(st.integers(0, 5000), st.floats(0, 2, allow_nan=False)), min_size=1, max_size=60)


@given(rate=st.floats(1, 1e6), burst_s=st.floats(0, 1), chunks=chunks)
def test_a_copier_that_waits_as_told_never_runs_ahead_of_the_limit_by_more_than_one_chunk(rate, burst_s, chunks):
    # a chunk goes out at `now`, the copier then waits what charge() says (plus any idle time of its own)
    bucket = TokenBucket(rate, rate * burst_s, now=0.0)
    now, sent = 0.0, 0
    for size, idle in chunks:
        sent += size
        # everything sent up to now (this chunk included) fits the rate since 0, the burst and this one chunk
        assert sent <= rate * now + rate * burst_s + size + 1e-6 * max(1.0, sent)
        now += bucket.charge(size, now) + idle


@given(rate=st.floats(1, 1e5), sizes=st.lists(st.integers(1, 10_000), min_size=5, max_size=50))
def test_a_copier_that_never_idles_runs_at_the_limit(rate, sizes):
    """Sent back to back, the chunks take (total - burst - last chunk) / rate at least and total / rate at most."""
    bucket = TokenBucket(rate, 0, now=0.0)
    now = 0.0
    for size in sizes:
        now += bucket.charge(size, now)
    assert now == pytest.approx(sum(sizes) / rate, rel=1e-6)


def test_waiting_serves_the_slower_measure():
    throttle = Throttle(RateLimit(bytes_per_second=1000, records_per_second=10), now=0.0, burst_s=0)
    assert throttle.charge(5, 100, now=0.0) == pytest.approx(0.5)  # records: 5 / 10 per s
    assert throttle.charge(1, 2000, now=0.5) == pytest.approx(2.0)  # bytes: 2000 / 1000 per s (records 0.1 s)


def test_a_chunk_is_a_quarter_second_of_the_limit():
    assert Throttle(RateLimit(records_per_second=100), 0.0).chunk_records(None) == 25
    assert Throttle(RateLimit(bytes_per_second=4000), 0.0).chunk_records(10.0) == 100
    assert Throttle(RateLimit(bytes_per_second=4000), 0.0).chunk_records(None) == 100  # no size known yet
    assert Throttle(RateLimit(records_per_second=1), 0.0).chunk_records(None) == 1
    assert Throttle(RateLimit(), 0.0).chunk_records(100.0) is None


def rate(value: float | None) -> float:
    """A share's rate, which a limited share always has."""
    assert value is not None
    return value


@given(limit=st.floats(1, 1e9), parts=st.lists(st.integers(0, 10**7), min_size=1, max_size=40))
def test_shares_by_offsets_never_add_up_to_more_than_the_limit(limit, parts):
    total = sum(parts)
    shares = [share_of(RateLimit(bytes_per_second=limit, records_per_second=limit / 10), p, total) for p in parts]
    if total and all(parts):
        assert sum(rate(s.bytes_per_second) for s in shares) <= limit * (1 + 1e-9)
        assert sum(rate(s.records_per_second) for s in shares) <= limit / 10 * (1 + 1e-9)
        # proportional: tasks copying at their share finish together
        for s, p in zip(shares, parts, strict=True):
            assert s.bytes_per_second == pytest.approx(limit * p / total)
    assert all(s.bytes_per_second <= limit * (1 + 1e-9) for s in shares)


def test_no_limit_stays_no_limit_and_bad_limits_are_refused():
    assert share_of(RateLimit(), 5, 10).unlimited
    with pytest.raises(ValueError, match="bytes_per_second"):
        RateLimit(bytes_per_second=0)
    with pytest.raises(ValueError, match="not a part"):
        share_of(RateLimit(records_per_second=1), 11, 10)
    with pytest.raises(ValueError, match="share"):
        RateLimit(records_per_second=1).scaled(1.5)
