"""The copier's side of the rate limit and the window: how long to wait before the next chunk, and when to stop.

One ``BatchPace`` per ``runner.copy_group`` call (a Spark task, or the whole plan in process): its share of the
migration's limit (``core.batches.rate_limit.share_of``, by offsets) in one bucket its lanes share under a lock, and the
plan's deadline. The copier charges each chunk after producing it and, before the next one, waits out the debt
while serving delivery reports; it never changes what a chunk holds or where a range stops, except that at the
deadline the range stops at the chunk boundary it is at (``copy.range_copy.RangeCursor.stop``), exactly as a
record cap stops it. So throttling only delays, and a deadline only ends a range early.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kafka_ferry.core.batches.rate_limit import RateLimit, Throttle


class BatchPace:
    """The rate limit share and the deadline the lanes of one task copy under (thread-safe)."""

    def __init__(self, limit: RateLimit, deadline_ms: int | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.limit, self.deadline_ms = limit, deadline_ms
        self.clock, self.wall = clock, wall
        self._lock = threading.Lock()
        self._throttle = None if limit.unlimited else Throttle(limit, clock())
        self._records = self._bytes = 0
        self.waited_s = 0.0

    @property
    def limited(self) -> bool:
        return self._throttle is not None

    def past_deadline(self, share_ms: int | None = None) -> bool:
        """The window's deadline has come, or this partition's share of it (``share_ms``, never after it)."""
        deadline = self.deadline_ms if share_ms is None or self.deadline_ms is None else min(share_ms,
                                                                                              self.deadline_ms)
        return deadline is not None and self.wall() * 1000 >= deadline

    def now_ms(self) -> int:
        return int(self.wall() * 1000)

    def seconds_to_deadline(self) -> float | None:
        return None if self.deadline_ms is None else max(0.0, self.deadline_ms / 1000 - self.wall())

    def chunk_records(self) -> int | None:
        """The most records the next chunk should hold (None: no bound): a quarter second of the share."""
        if self._throttle is None:
            return None
        with self._lock:
            mean = self._bytes / self._records if self._records else None
            return self._throttle.chunk_records(mean)

    def charge(self, records: int, size: int) -> float:
        """A chunk went out; the seconds to wait before the next one (never past the deadline)."""
        if self._throttle is None or not (records or size):
            return 0.0
        with self._lock:
            self._records += records
            self._bytes += size
            wait = self._throttle.charge(records, size, self.clock())
        left = self.seconds_to_deadline()
        return wait if left is None else min(wait, left)

    def wait(self, seconds: float, serve: Callable[[float], object]) -> float:
        """Wait ``seconds`` while ``serve`` (the producer's poll) handles delivery reports; returns the time waited."""
        if seconds <= 0:
            return 0.0
        start = self.clock()
        end = start + seconds
        while (now := self.clock()) < end:
            serve(min(0.1, end - now))
        waited = self.clock() - start
        with self._lock:
            self.waited_s += waited
        return waited
