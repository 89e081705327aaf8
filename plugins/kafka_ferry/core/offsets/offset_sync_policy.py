"""Which copied records get an offset sync, so the sparse sync log is enough for EXACT translation.

MM2 emits a sync on the first record, on an upstream gap and every ``offset.lag.max`` records; its
translator then adds one past the sync and re-delivers up to that many records. kafka-ferry is
stricter: at every discontinuity it also emits the record *before* it (the last of its run), and
it emits the last record of every batch. That buys the invariant, for two consecutive syncs
``s1 < s2`` of a partition (ordered by upstream offset):

  (run)  ``s2.up - s1.up == s2.down - s1.down`` and every upstream offset U in ``[s1.up, s2.up)``
         was copied contiguously to ``down = s1.down + (U - s1.up)``; or
  (hole) ``s1`` is the last record of a contiguous run and ``s2`` the first record of the next,
         and upstream offsets strictly between them hold no copied record.

Proof sketch: if a discontinuity lay between two records r, r' with ``s1 <= r < r' <= s2``, both r
and r' would be syncs, so ``r == s1`` and ``r' == s2``. With ``finish()`` at the end of every batch
the last sync is also the last copied record, which lets ``offset_translation`` map offsets past
it to ``last.down + 1`` without guessing.

A discontinuity is ``up != prev_up + 1`` or ``down != prev_down + 1``. Offsets must strictly increase
on both sides; anything else (a re-copy, a recreated downstream topic) raises instead of silently
breaking the invariant; start a fresh tracker without ``resume`` after a downstream reset.
"""

from __future__ import annotations

from typing import NamedTuple


class SyncPoint(NamedTuple):
    """One (upstream, downstream) offset pair; compares equal to a plain 2-tuple."""

    upstream_offset: int
    downstream_offset: int


def is_contiguous(previous: tuple[int, int], current: tuple[int, int]) -> bool:
    """True if ``current`` directly follows ``previous`` on both the upstream and downstream side."""
    return current[0] == previous[0] + 1 and current[1] == previous[1] + 1


class PartitionSyncTracker:
    """Feed one partition's copied records in order; returns the syncs to emit, oldest first.

    A *batch* starts at the first ``observe`` (or the first after ``finish``) and ends at ``finish``.
    The first record of every batch is always emitted, even when it is contiguous with the previous
    batch's last record: that costs one sync per batch and makes a batch's sync log self-contained.

    ``resume(last_up, last_down)`` (or ``previous=`` in the constructor) tells a new tracker which
    record the previous batch ended on. It is treated as already emitted (the previous batch's
    ``finish()`` emitted it) and is used to check that offsets keep increasing across batches; the
    first record counts as a discontinuity only if it is not contiguous with it, which changes
    nothing about what is emitted since the first record is emitted anyway.
    """

    def __init__(self, interval: int, previous: tuple[int, int] | None = None) -> None:
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            raise ValueError(f"interval must be an int >= 1, got {interval!r}")
        self._interval = interval
        self._last_observed: SyncPoint | None = None
        self._last_emitted: SyncPoint | None = None
        self._since_emitted = 0  # records observed after the last emitted sync
        self._batch_open = False
        if previous is not None:
            self.resume(*previous)

    @property
    def interval(self) -> int:
        return self._interval

    @property
    def last_observed(self) -> SyncPoint | None:
        """The last record seen (or resumed from); the next batch resumes from it."""
        return self._last_observed

    @property
    def last_emitted(self) -> SyncPoint | None:
        return self._last_emitted

    @property
    def batch_open(self) -> bool:
        return self._batch_open

    def resume(self, last_upstream_offset: int, last_downstream_offset: int) -> None:
        """Continue after a batch that ended on (and emitted) this record."""
        if self._batch_open:
            raise RuntimeError("resume() while a batch is open: call finish() first or its last sync is lost")
        previous = _point(last_upstream_offset, last_downstream_offset)
        if self._last_observed is not None:
            _check_increasing(self._last_observed, previous)
        self._last_observed = previous
        self._last_emitted = previous
        self._since_emitted = 0

    def observe(self, upstream_offset: int, downstream_offset: int) -> list[SyncPoint]:
        """Record one copied record; return the syncs to emit now (0, 1 or 2, ascending)."""
        current = _point(upstream_offset, downstream_offset)
        previous = self._last_observed
        if previous is not None:
            _check_increasing(previous, current)
        self._last_observed = current

        if not self._batch_open:
            self._batch_open = True
            return self._emit([current])
        assert previous is not None  # a batch is only open after at least one observe
        if not is_contiguous(previous, current):
            # Close the run behind us so offsets inside it stay exact, then open the new run.
            pending = [previous] if previous != self._last_emitted else []
            return self._emit([*pending, current])
        self._since_emitted += 1
        if self._since_emitted >= self._interval:
            return self._emit([current])
        return []

    def observe_run(self, upstream_offset: int, downstream_offset: int, count: int) -> list[SyncPoint]:
        """Record ``count`` records copied contiguously on both sides, starting at this pair.

        Emits exactly what ``count`` calls of ``observe(up + i, down + i)`` would, in O(syncs) instead of
        O(records): inside a run only the interval counter moves, so its emissions are arithmetic.
        """
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"count must be an int >= 1, got {count!r}")
        emitted = self.observe(upstream_offset, downstream_offset)  # checks, batch start, discontinuity
        rest = count - 1
        if not rest:
            return emitted
        last = _point(upstream_offset + rest, downstream_offset + rest)
        # observe() would add 1 per record and emit whenever the counter reaches the interval.
        first_due = self._interval - self._since_emitted
        if first_due <= rest:
            due = range(first_due, rest + 1, self._interval)
            emitted = [*emitted, *(SyncPoint(upstream_offset + i, downstream_offset + i) for i in due)]
            self._last_emitted = emitted[-1]
            self._since_emitted = rest - due[-1]
        else:
            self._since_emitted += rest
        self._last_observed = last
        return emitted

    def finish(self) -> list[SyncPoint]:
        """End the batch: emit its last record unless already emitted. Safe to call on an empty batch."""
        was_open, self._batch_open = self._batch_open, False
        if not was_open or self._last_observed is None or self._last_observed == self._last_emitted:
            return []
        return self._emit([self._last_observed])

    def _emit(self, points: list[SyncPoint]) -> list[SyncPoint]:
        self._last_emitted = points[-1]
        self._since_emitted = 0
        return points


def _point(upstream_offset: int, downstream_offset: int) -> SyncPoint:
    for name, value in (("upstream_offset", upstream_offset), ("downstream_offset", downstream_offset)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return SyncPoint(upstream_offset, downstream_offset)


def _check_increasing(previous: SyncPoint, current: SyncPoint) -> None:
    if current.upstream_offset <= previous.upstream_offset or current.downstream_offset <= previous.downstream_offset:
        raise ValueError(
            f"offsets must strictly increase on both sides: {tuple(current)} after {tuple(previous)} "
            "(re-copy or downstream reset? start a fresh tracker)"
        )
