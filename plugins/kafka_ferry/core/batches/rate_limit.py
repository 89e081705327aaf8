"""A migration's copy rate limit (``copy.max_bytes_per_second``, ``copy.max_records_per_second``): the pure part.

Why a debt-based token bucket: the copier learns a chunk's size only once it has read it, so it charges the chunk
after producing it and waits out the debt before it produces the next one. Over any stretch of time ``t`` the
records (bytes) produced are then at most ``rate * t`` plus one chunk: the limit holds to within one chunk,
however the chunks are sized, and a chunk bigger than any burst allowance is never stuck.

Why shares by offsets: a batch's partitions are spread over Spark tasks balanced by offsets, and each task copies
on its own executor with no shared clock or counter. Each task gets the part of the migration's limit that its
offsets are of the batch's offsets (``share_of``), so the shares never add up to more than the limit, and tasks
copying at their shares finish together (none idles on a share it cannot use). Within a task the lanes (threads)
share one bucket: a lane that finishes leaves its part to the others.

Pure: the clock is an argument; ``copy.throttle`` puts a lock and ``time.monotonic`` around it.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_CHUNK = 100  # records of a byte-limited copier's first chunk, before it knows the record size


@dataclass(frozen=True)
class RateLimit:
    """Records and/or bytes per second; None is no limit on that measure."""

    bytes_per_second: float | None = None
    records_per_second: float | None = None

    def __post_init__(self) -> None:
        for name in ("bytes_per_second", "records_per_second"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | float) and value > 0):
                raise ValueError(f"rate limit {name} must be a number > 0 or None, got {value!r}")

    @property
    def unlimited(self) -> bool:
        return self.bytes_per_second is None and self.records_per_second is None

    def scaled(self, fraction: float) -> RateLimit:
        """This limit times ``fraction`` (0 < fraction <= 1): one task's share."""
        if not 0 < fraction <= 1:
            raise ValueError(f"a share of a rate limit is in (0, 1], got {fraction!r}")
        return RateLimit(None if self.bytes_per_second is None else self.bytes_per_second * fraction,
                         None if self.records_per_second is None else self.records_per_second * fraction)


def share_of(limit: RateLimit, part_offsets: int, total_offsets: int) -> RateLimit:
    """The part of ``limit`` a task copying ``part_offsets`` of a batch's ``total_offsets`` gets.

    A task with no offsets copies nothing; it still gets a (tiny) share, never above the limit.
    """
    if part_offsets < 0 or total_offsets < 0 or part_offsets > total_offsets:
        raise ValueError(f"offsets {part_offsets} of {total_offsets}: not a part of the batch")
    if limit.unlimited:
        return limit
    if total_offsets == 0:
        return limit
    return limit.scaled(max(part_offsets, 1) / total_offsets)


class TokenBucket:
    """Debt-based: ``charge`` takes what was produced, possibly going into debt; ``wait`` says how long to wait
    until the debt is paid. ``burst`` is how much may go out at once after an idle stretch."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if rate <= 0 or burst < 0:
            raise ValueError(f"token bucket: rate {rate!r} must be > 0, burst {burst!r} >= 0")
        self.rate, self.burst = float(rate), float(burst)
        self.tokens, self.at = float(burst), float(now)

    def _refill(self, now: float) -> None:
        if now > self.at:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now

    def charge(self, amount: float, now: float) -> float:
        """Take ``amount`` (already produced); returns the seconds to wait before producing more."""
        if amount < 0:
            raise ValueError(f"token bucket: cannot charge {amount!r}")
        self._refill(now)
        self.tokens -= amount
        return self.wait(now)

    def wait(self, now: float) -> float:
        self._refill(now)
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


class Throttle:
    """One bucket per limited measure (records, bytes); a chunk waits for the slower of them.

    ``burst_s``: how many seconds of the limit may go out at once after an idle stretch (small: the limit is
    there for the source's sake, and the chunk itself is the burst the copier needs)."""

    def __init__(self, limit: RateLimit, now: float, burst_s: float = 0.1) -> None:
        self.limit = limit
        self.records = (None if limit.records_per_second is None
                        else TokenBucket(limit.records_per_second, limit.records_per_second * burst_s, now))
        self.bytes = (None if limit.bytes_per_second is None
                      else TokenBucket(limit.bytes_per_second, limit.bytes_per_second * burst_s, now))

    def charge(self, records: int, size: int, now: float) -> float:
        """A chunk of ``records`` records and ``size`` bytes went out; returns the seconds to wait."""
        waits = [0.0]
        if self.records is not None:
            waits.append(self.records.charge(records, now))
        if self.bytes is not None:
            waits.append(self.bytes.charge(size, now))
        return max(waits)

    def chunk_records(self, mean_record_bytes: float | None, seconds: float = 0.25) -> int | None:
        """At most how many records one chunk should hold so it is about ``seconds`` of the limit (None: no
        bound). Why: a chunk is produced at once; a small limit must not see a whole consume() batch burst."""
        bounds = []
        if self.records is not None:
            bounds.append(self.records.rate * seconds)
        if self.bytes is not None:
            # before the first chunk tells the record size, a small one: a whole consume() batch could be
            # many seconds of a small byte limit
            bounds.append(self.bytes.rate * seconds / mean_record_bytes if mean_record_bytes else FIRST_CHUNK)
        return max(1, int(min(bounds))) if bounds else None
