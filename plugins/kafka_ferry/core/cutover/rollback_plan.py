"""A rollback after cutover, decided (pure): what to copy back per destination partition, and where each group
resumes on the source.

After ``promote`` the destination holds, per partition, two kinds of records: *forward-copied* ones (they carry this
migration's provenance; the forward sync log maps source offset -> destination offset) and records producers wrote
there after the cutover. A rollback copies back exactly the second kind (the reverse copier's loop guard skips every
record whose provenance names the source cluster) with its own provenance and its own sync log (destination offset
-> source offset). Both logs keep the sync-log invariants of ``core.offsets.offset_translation`` (A: ordered both ways,
B: consecutive syncs are a run or a hole, C: the last sync is the last copied record).

Invariants a resume decision rests on:

  R1. Every destination record a consumer can read after the cutover has exactly one counterpart on the source:
      a forward-copied record its original (forward sync log), a copied-back record its copy (reverse sync log).
      A destination offset is never both (``RollbackPlanError`` otherwise: the two logs disagree).
  R2. The source order of counterparts is their destination order (forward copy and copy-back both keep order,
      and the copy-back appends after everything forward-copied).

So a group committed at destination offset G resumes on the source at the counterpart of the first destination
record at or after G: the consumer reads on the source exactly the records it had not read on the destination (no
loss, no duplicate). Past every counterpart, it resumes after the last one (``source_end``). The same function read
the other way (roles swapped) is where a group on the source resumes on the destination after a rollback.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any, Final

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.offsets.offset_decisions import OffsetDecision, PartitionCopy
from kafka_ferry.core.offsets.offset_translation import normalize_syncs

FORWARD_RECORD: Final = "forward-copied-record"
COPIED_BACK_RECORD: Final = "copied-back-record"
AFTER_EVERYTHING: Final = "after-every-counterpart"
RESUME_METHODS: Final = (FORWARD_RECORD, COPIED_BACK_RECORD, AFTER_EVERYTHING)


class RollbackPlanError(Permanent, ValueError):
    """The forward and reverse sync logs contradict each other (R1): no exact resume point can be decided, on any
    try (the logs are what they are)."""


@dataclass(frozen=True)
class Resume:
    """Where a consumer at ``from_offset`` (on the side it stopped) resumes on the other side, and why."""

    from_offset: int
    to_offset: int
    method: str
    reason: str

    def __post_init__(self) -> None:
        if self.method not in RESUME_METHODS:
            raise ValueError(f"unknown resume method {self.method!r}")
        if self.from_offset < 0 or self.to_offset < 0:
            raise ValueError(f"negative offset in {self!r}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Next:
    here: int          # offset of the next record on the side the consumer stopped
    there: int         # its counterpart's offset on the other side
    span_start: int    # "here" offsets of the syncs around the span it was found in
    span_end: int
    claimed_run: bool  # found inside a run's span rather than on a sync


def _next_record(pairs: list[tuple[int, int]], offset: int) -> _Next | None:
    """The first record at or after ``offset`` among ``pairs`` ((here, there) syncs, sorted by here)."""
    heres = [h for h, _ in pairs]
    j = bisect_left(heres, offset)
    if j == len(pairs):
        return None  # invariant C: past the last sync nothing was copied
    here, there = pairs[j]
    if here == offset or j == 0:
        return _Next(here, there, here, here, False)
    (h1, t1) = pairs[j - 1]
    if here - h1 == there - t1:  # equal spans: a run (invariant B), unless a hole exactly as wide on both sides
        return _Next(offset, t1 + (offset - h1), h1, here, True)
    return _Next(here, there, here, here, False)  # a hole: no record strictly between, the next one is the sync's


def _refuted(claim: _Next | None, other: list[tuple[int, int]]) -> bool:
    """A run's claim is false when the other log has a record inside its span: in a true run every offset between
    its two syncs is one of its own records. Every run of the other log starts and ends on a sync (invariant B),
    so a record of it inside the span shows as a sync there."""
    if claim is None or not claim.claimed_run:
        return False
    j = bisect_left(other, (claim.span_start + 1,))
    return j < len(other) and other[j][0] < claim.span_end


def resume_point(originals: Iterable[tuple[int, int]], copies: Iterable[tuple[int, int]], offset: int,
                 end: int) -> Resume:
    """Where a consumer at ``offset`` on side H resumes on side T.

    ``originals`` and ``copies`` are the two sync logs, both as (H offset, T offset): records copied from H to T,
    and records copied from T to H (``resume_on_source`` and ``resume_on_destination`` orient them). ``end``: the T
    offset after every counterpart, where a consumer past all of them goes on.
    """
    if offset < 0 or end < 0:
        raise ValueError(f"offsets must be >= 0: offset {offset}, end {end}")
    a = _pairs(originals)
    b = _pairs(copies)
    last_there = max([t for _, t in a[-1:]] + [t for _, t in b[-1:]], default=-1)
    if end <= last_there:
        raise RollbackPlanError(f"end {end} is not after the last counterpart {last_there}")
    na, nb = _next_record(a, offset), _next_record(b, offset)
    # Equal spans across a hole look like a run; the other log's records inside the span tell (R1, R2). A true
    # run is never refuted, and of two false claims one always is (the other's next record lies in its span).
    if na is not None and _refuted(na, b):
        na = _next_record(a, na.span_end)
    if nb is not None and _refuted(nb, a):
        nb = _next_record(b, nb.span_end)
    if na is not None and nb is not None and na.here == nb.here:
        raise RollbackPlanError(f"offset {na.here} is claimed by both sync logs ({na.there} and {nb.there})")
    candidates = [(n.here, n, m) for n, m in ((na, FORWARD_RECORD), (nb, COPIED_BACK_RECORD)) if n is not None]
    if not candidates:
        return Resume(offset, end, AFTER_EVERYTHING, f"no record with a counterpart at or after {offset}: "
                                                     f"resume after the last one, at {end}")
    here, n, method = min(candidates, key=lambda c: c[0])
    kind = "original" if method == FORWARD_RECORD else "copy"
    return Resume(offset, n.there, method, f"next record at or after {offset} is {here}, its {kind} is at "
                                           f"{n.there}" + (" (inside a run)" if n.claimed_run else " (on a sync)"))


def resume_on_source(forward_syncs: Iterable[tuple[int, int]], reverse_syncs: Iterable[tuple[int, int]],
                     destination_offset: int, source_end: int) -> Resume:
    """A group committed at ``destination_offset``: its exact source offset after the copy-back.

    ``forward_syncs``: (source, destination) of the forward copy; ``reverse_syncs``: (destination, source) of the
    copy-back; ``source_end``: the source offset after every counterpart (the copy-back's end, or the forward
    copy's copied end when nothing was copied back)."""
    forward = [(d, s) for s, d in normalize_syncs(forward_syncs)]
    return resume_point(forward, reverse_syncs, destination_offset, source_end)


def resume_on_destination(forward_syncs: Iterable[tuple[int, int]], reverse_syncs: Iterable[tuple[int, int]],
                          source_offset: int, destination_end: int) -> Resume:
    """The other way (a promotion after a rollback): a group committed at ``source_offset`` resumes on the
    destination at the counterpart of the first source record at or after it: a forward-copied record's copy or a
    copied-back record's original. Returned with methods named from the source's side: ``FORWARD_RECORD`` is a
    record copied forward (its copy), ``COPIED_BACK_RECORD`` one copied back (its original)."""
    reverse = [(s, d) for d, s in normalize_syncs(reverse_syncs)]
    return resume_point(forward_syncs, reverse, source_offset, destination_end)


def _pairs(syncs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(p[0], p[1]) for p in normalize_syncs(syncs)]


@dataclass(frozen=True)
class CopyBackRange:
    """Destination offsets ``[start, end)`` of one partition the copy-back reads (forward-copied records in it are
    skipped by the loop guard), and why it starts there."""

    destination_topic: str
    partition: int
    source_topic: str
    start: int
    end: int
    reason: str

    @property
    def offsets(self) -> int:
        return max(0, self.end - self.start)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def copy_back_range(destination_topic: str, partition: int, source_topic: str, *, forward_last_downstream: int | None,
                    reverse_next: int | None, log_start: int, stable_end: int) -> CopyBackRange:
    """What the copy-back of one destination partition reads.

    - a copy-back already ran here (``reverse_next``, its progress): on from there (exactly once across runs);
    - else after the last forward-copied record (``forward_last_downstream``): records before it were there at the
      cutover (forward-copied, or foreign ones that were there before the migration wrote; neither is copied back);
    - else (the forward copy copied nothing here) from the log start: every record is a post-cutover one.
    Never before the log start (retention), never past the last stable offset (an open transaction's records are
    not decided yet; a quiet destination has none)."""
    if reverse_next is not None:
        start, why = reverse_next, f"the copy-back's progress: next destination offset {reverse_next}"
    elif forward_last_downstream is not None:
        start, why = forward_last_downstream + 1, f"after the last forward-copied record {forward_last_downstream}"
    else:
        start, why = log_start, "nothing was copied forward to this partition: from its log start"
    if start < log_start:
        start, why = log_start, why + f" (raised to the log start {log_start})"
    end = max(start, stable_end)
    return CopyBackRange(destination_topic, partition, source_topic, start, end, why)


def across_rollback(decision: OffsetDecision, forward: PartitionCopy | None,
                    copied_back: PartitionCopy | None) -> OffsetDecision:
    """A forward translation corrected for a rollback that copied records back to this partition.

    After a rollback the source holds copied-back records between forward-copied ones; the forward sync log sees
    them as a hole (the forward copy skips them) and would resume a group inside them at the next forward-copied
    record, past the destination records they are copies of. A group at or after the first copied-back record
    resumes by ``resume_on_destination`` (both logs) instead; below it, and for partitions never copied back, the
    forward decision stands unchanged."""
    if (forward is None or copied_back is None or not copied_back.offset_map.syncs
            or decision.downstream_offset is None):
        return decision
    first = copied_back.offset_map.syncs[0]
    if decision.upstream_offset < first.downstream_offset:
        return decision
    end = max(forward.next_downstream_offset, copied_back.copied_upstream_end)
    r = resume_on_destination(forward.offset_map.syncs, copied_back.offset_map.syncs, decision.upstream_offset, end)
    return replace(decision, downstream_offset=r.to_offset, method=r.method,
                   reason=f"{r.reason} (across the rollback; forward alone: {decision.downstream_offset})")
