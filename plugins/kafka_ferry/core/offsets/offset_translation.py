"""Translate a consumer group's upstream offset into a downstream offset from one partition's syncs.

Invariants of a partition's sync log (``offset_sync_policy.PartitionSyncTracker`` establishes them):

  A. Ordered by upstream offset, syncs strictly increase in downstream offset too (checked here:
     a conflicting log raises ``SyncConflictError`` rather than translating on a guess).
  B. Consecutive syncs ``s1 < s2`` are either a *run* (``s2.up - s1.up == s2.down - s1.down``, every
     upstream offset in between copied contiguously) or a *hole* (``s1`` ends a run, ``s2`` starts
     the next, no copied record strictly between them).
  C. The last sync is the last copied record below ``copied_upstream_end`` (``finish()`` per batch).

Guarantees of ``translate_exact`` for ``first_sync.up <= U <= copied_upstream_end``: the first copied
record at or after the result downstream is the first copied record at or after U upstream (or, if
none, the result is ``last.down + 1``). So a consumer resuming there sees every copied record it had
not consumed (no loss) and none it had (no duplicates). The result *is* that record's offset, except
in one case the syncs cannot tell from a run: a hole as wide upstream as downstream (only possible
when the downstream has holes, e.g. transaction markers); then it lands inside the downstream hole.
Offsets above the copy are clamped to the copied end and flagged ``ahead-of-copy``; offsets below the
first sync are not translated (``before-first-sync``), like MM2.

``translate_mm2`` is MirrorMaker 2's rule (3.5+): never skips a record, may re-deliver up to the sync
interval. Simplification: the whole sync set is kept; MM2's store evicts down to 64 exponentially
spaced syncs per partition, which can only make its answer older (more re-delivery), never newer.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.offsets.offset_sync_policy import SyncPoint


class TranslationMethod(StrEnum):
    """How one translation was decided: stored with the decision and logged beside the committed offset (a str, so
    records and reports carry the value itself)."""

    EXACT_RUN = "exact-run"  # U inside a run: the same distance past its sync downstream
    HOLE_NEXT_RECORD = "hole-next-record"  # U inside a hole: the next copied record
    AT_COPIED_END = "at-copied-end"  # past the last sync, within the copy: the copied end downstream
    AHEAD_OF_COPY = "ahead-of-copy"  # above the copy: clamped to the copied end, flagged
    BEFORE_FIRST_SYNC = "before-first-sync"  # below the first sync: not translated, like MM2
    MM2_SYNC = "mm2-sync"  # MirrorMaker 2's rule, on a sync
    MM2_PLUS_ONE = "mm2-plus-one"  # MirrorMaker 2's rule, after a sync: sync.down + 1


_M = TranslationMethod  # short within this module
EXACT_METHODS: Final = frozenset({_M.EXACT_RUN, _M.HOLE_NEXT_RECORD, _M.AT_COPIED_END, _M.AHEAD_OF_COPY,
                                  _M.BEFORE_FIRST_SYNC})
MM2_METHODS: Final = frozenset({_M.MM2_SYNC, _M.MM2_PLUS_ONE, _M.BEFORE_FIRST_SYNC})


class SyncConflictError(Retryable, ValueError):
    """The sync log breaks invariant A (e.g. a failed batch's syncs mixed with its retry's)."""


@dataclass(frozen=True)
class Translation:
    """One translation decision; ``reason`` is meant to be logged next to the committed offset."""

    upstream_offset: int
    downstream_offset: int | None
    method: TranslationMethod
    reason: str

    def __post_init__(self) -> None:
        if self.method not in EXACT_METHODS | MM2_METHODS:
            raise ValueError(f"unknown translation method {self.method!r}")
        if (self.downstream_offset is None) != (self.method == _M.BEFORE_FIRST_SYNC):
            raise ValueError(f"method {self.method!r} with downstream_offset {self.downstream_offset!r}")


def normalize_syncs(syncs: Iterable[tuple[int, int]]) -> tuple[SyncPoint, ...]:
    """Sort by upstream offset, drop exact duplicates, and enforce invariant A."""
    points = set()
    for pair in syncs:
        up, down = pair
        for name, value in (("upstream", up), ("downstream", down)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"sync {tuple(pair)!r}: {name} offset must be an int >= 0")
        points.add(SyncPoint(up, down))
    ordered = tuple(sorted(points))
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after.upstream_offset == before.upstream_offset:
            raise SyncConflictError(f"upstream offset {before.upstream_offset} has two syncs: {before}, {after}")
        if after.downstream_offset <= before.downstream_offset:
            raise SyncConflictError(f"downstream offsets go backwards between syncs {tuple(before)} and {tuple(after)}")
    return ordered


class PartitionOffsetMap:
    """A partition's syncs, normalized once, translating many offsets by bisection."""

    def __init__(self, syncs: Iterable[tuple[int, int]]) -> None:
        self._syncs = normalize_syncs(syncs)
        self._upstream = [s.upstream_offset for s in self._syncs]

    @property
    def syncs(self) -> tuple[SyncPoint, ...]:
        return self._syncs

    def __len__(self) -> int:
        return len(self._syncs)

    def _floor_index(self, upstream_offset: int) -> int:
        """Index of the newest sync with up <= U, or -1."""
        _check_offset("upstream_offset", upstream_offset)
        return bisect_right(self._upstream, upstream_offset) - 1

    def _before_first(self, upstream_offset: int) -> Translation:
        if not self._syncs:
            reason = "no offset syncs for this partition"
        else:
            reason = f"below the first sync {tuple(self._syncs[0])}: nothing copied at or before it is known"
        return Translation(upstream_offset, None, _M.BEFORE_FIRST_SYNC, reason)

    def translate_mm2(self, upstream_offset: int) -> Translation:
        """MirrorMaker 2 (3.5+): the floor sync's downstream, plus one unless U is exactly on it."""
        i = self._floor_index(upstream_offset)
        if i < 0:
            return self._before_first(upstream_offset)
        s = self._syncs[i]
        if upstream_offset == s.upstream_offset:
            return Translation(upstream_offset, s.downstream_offset, _M.MM2_SYNC, f"on sync {tuple(s)}")
        # One past the sync, never more: going further could skip records MM2 cannot see.
        return Translation(
            upstream_offset, s.downstream_offset + 1, _M.MM2_PLUS_ONE, f"after sync {tuple(s)}: sync.down + 1"
        )

    def translate_exact(self, upstream_offset: int, copied_upstream_end: int) -> Translation:
        """Exact translation; ``copied_upstream_end`` is the next source offset the copy would read."""
        _check_offset("copied_upstream_end", copied_upstream_end)
        if self._syncs and copied_upstream_end <= self._syncs[-1].upstream_offset:
            raise ValueError(
                f"copied_upstream_end {copied_upstream_end} must be above the last sync {tuple(self._syncs[-1])}"
            )
        i = self._floor_index(upstream_offset)
        if i < 0:
            return self._before_first(upstream_offset)
        s1 = self._syncs[i]
        if upstream_offset == s1.upstream_offset:
            return Translation(upstream_offset, s1.downstream_offset, _M.EXACT_RUN, f"on sync {tuple(s1)}")

        if i == len(self._syncs) - 1:
            # Invariant C: s1 is the last copied record, so everything above it maps to its successor.
            down = s1.downstream_offset + 1
            if upstream_offset <= copied_upstream_end:
                reason = f"after the last sync {tuple(s1)}, within copied end {copied_upstream_end}"
                return Translation(upstream_offset, down, _M.AT_COPIED_END, reason)
            reason = f"ahead of the copied end {copied_upstream_end}: clamped to last sync {tuple(s1)} + 1"
            return Translation(upstream_offset, down, _M.AHEAD_OF_COPY, reason)

        s2 = self._syncs[i + 1]
        #   upstream    s1.up ... U ... s2.up
        #   downstream  s1.down ....... s2.down
        # Equal spans: a contiguous run (invariant B), U sits at the same distance downstream.
        # Unequal spans: a hole; U holds no copied record, the next one is s2.
        # (Equal spans across a hole are possible, but then s1.down + (U - s1.up) lies in
        # (s1.down, s2.down], where the next copied record is s2 too: same consumer outcome.)
        if s2.upstream_offset - s1.upstream_offset == s2.downstream_offset - s1.downstream_offset:
            down = s1.downstream_offset + (upstream_offset - s1.upstream_offset)
            reason = f"between {tuple(s1)} and {tuple(s2)}, equal spans (a run): sync.down + (U - sync.up)"
            return Translation(upstream_offset, down, _M.EXACT_RUN, reason)
        return Translation(
            upstream_offset,
            s2.downstream_offset,
            _M.HOLE_NEXT_RECORD,
            f"in the hole between {tuple(s1)} and {tuple(s2)}: next copied record",
        )


def translate_mm2(syncs: Iterable[tuple[int, int]], upstream_offset: int) -> int | None:
    """MirrorMaker 2 semantics; None means no translation (no checkpoint)."""
    return PartitionOffsetMap(syncs).translate_mm2(upstream_offset).downstream_offset


def translate_exact(syncs: Iterable[tuple[int, int]], upstream_offset: int, copied_upstream_end: int) -> Translation:
    """kafka-ferry's exact translation; see the module docstring for what it guarantees."""
    return PartitionOffsetMap(syncs).translate_exact(upstream_offset, copied_upstream_end)


def _check_offset(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
