"""Per group and partition, where a consumer resumes on the destination (pure: no clients, no Airflow).

Builds on ``core.offsets.offset_translation.translate_exact`` and adds what the sync log alone cannot know:

* The copied end is ``progress.next_upstream_offset``. Syncs at or above it come from a batch whose
  progress was never written (a crash); they are ignored, and ``progress.last_*`` (the last record the
  progress covers, which that batch's ``finish()`` emitted) is added so invariant C holds.
* Below the first sync: the first batch started at the source's log start, so no committed record lies
  between a committed offset U >= log start and the first copied record: resume at that record
  (``first-copied-record``). U below today's log start is flagged (the source itself would reset).
* A partition with progress but no copied record: everything a consumer at U <= copied end will want is
  copied later (or is already there from a batch whose progress is missing), so resume at the
  destination's log start (``nothing-copied``).
* A partition the copy never touched is not translated (``not-copied``): no checkpoint, no commit.

Decisions that a person must look at (clamped, not translated, below the log start) are ``flagged``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final

from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.offsets.offset_sync_policy import SyncPoint
from kafka_ferry.core.offsets.offset_translation import PartitionOffsetMap, TranslationMethod

FIRST_COPIED_RECORD: Final = "first-copied-record"
BELOW_LOG_START: Final = "below-source-log-start"
NOTHING_COPIED: Final = "nothing-copied"
NOT_COPIED: Final = "not-copied"
FLAGGED_METHODS: Final = frozenset({TranslationMethod.AHEAD_OF_COPY, TranslationMethod.BEFORE_FIRST_SYNC,
                                    BELOW_LOG_START, NOT_COPIED})


@dataclass(frozen=True)
class PartitionCopy:
    """What the copy of one source partition established, plus both ends' offsets at translation time."""

    source_topic: str
    partition: int
    destination_topic: str
    copied_upstream_end: int
    syncs: tuple[SyncPoint, ...] = ()
    source_log_start: int = 0
    downstream_start: int = 0
    downstream_end: int = 0
    offset_map: PartitionOffsetMap = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "offset_map", PartitionOffsetMap(self.syncs))

    @property
    def key(self) -> tuple[str, int]:
        return self.source_topic, self.partition

    @property
    def next_downstream_offset(self) -> int:
        """Where the record after the copied end will land (or already sits)."""
        syncs = self.offset_map.syncs
        return syncs[-1].downstream_offset + 1 if syncs else self.downstream_start


def partition_copy(progress: PartitionProgress, syncs: Iterable[tuple[int, int]], source_log_start: int = 0,
                   downstream_start: int = 0, downstream_end: int = 0) -> PartitionCopy:
    """Keep the syncs the progress covers (below the copied end) and add the progress's last record."""
    end = progress.next_upstream_offset
    kept = {SyncPoint(up, down) for up, down in syncs if up < end}
    if progress.last_upstream_offset is not None and progress.last_downstream_offset is not None:
        kept.add(SyncPoint(progress.last_upstream_offset, progress.last_downstream_offset))
    return PartitionCopy(progress.source_topic, progress.partition, progress.destination_topic, end,
                         tuple(sorted(kept)), source_log_start, downstream_start, downstream_end)


@dataclass(frozen=True)
class OffsetDecision:
    """One group's committed source offset on one partition and where it resumes on the destination."""

    group: str
    source_topic: str
    partition: int
    destination_topic: str
    upstream_offset: int
    downstream_offset: int | None
    method: str
    reason: str
    metadata: str = ""
    copied_upstream_end: int | None = None
    downstream_end: int | None = None

    @property
    def flagged(self) -> bool:
        return self.method in FLAGGED_METHODS

    @property
    def upstream_lag(self) -> int | None:
        """Copied offsets the group had not consumed on the source (negative: committed beyond the copy)."""
        return None if self.copied_upstream_end is None else self.copied_upstream_end - self.upstream_offset

    @property
    def downstream_lag(self) -> int | None:
        """Destination offsets the group will read after resuming (markers included)."""
        if self.downstream_offset is None or self.downstream_end is None:
            return None
        return max(0, self.downstream_end - self.downstream_offset)

    def as_dict(self) -> dict[str, Any]:
        # every field is a str, an int or None: a shallow dict equals ``asdict`` (which deep-copies each value and
        # was a second of a 2,000-partition promotion's report and stored decisions)
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "flagged": self.flagged,
                "upstream_lag": self.upstream_lag, "downstream_lag": self.downstream_lag}

    def describe(self) -> str:
        to = "not translated" if self.downstream_offset is None else f"-> {self.destination_topic}-{self.partition}@" \
                                                                     f"{self.downstream_offset}"
        return (f"group {self.group} {self.source_topic}-{self.partition}@{self.upstream_offset} {to} "
                f"[{self.method}] {self.reason}")


def decide(group: str, upstream_offset: int, metadata: str, copy: PartitionCopy | None,
           source_topic: str = "", partition: int = -1) -> OffsetDecision:
    """Translate one committed offset; every outcome carries the reason it was chosen."""
    if copy is None:
        return OffsetDecision(group, source_topic, partition, "", upstream_offset, None, NOT_COPIED,
                              "no copy progress for this partition: not migrated (yet)", metadata)

    def made(down: int | None, method: str, reason: str) -> OffsetDecision:
        return OffsetDecision(group, copy.source_topic, copy.partition, copy.destination_topic, upstream_offset,
                              down, method, reason, metadata, copy.copied_upstream_end, copy.downstream_end)

    if not copy.offset_map.syncs:
        if upstream_offset > copy.copied_upstream_end:
            return made(copy.downstream_start, TranslationMethod.AHEAD_OF_COPY,
                        f"ahead of the copied end {copy.copied_upstream_end} where nothing was copied: "
                        f"clamped to the destination start {copy.downstream_start}")
        return made(copy.downstream_start, NOTHING_COPIED,
                    f"no record copied below {copy.copied_upstream_end}: destination start {copy.downstream_start}")
    translation = copy.offset_map.translate_exact(upstream_offset, copy.copied_upstream_end)
    if translation.method != TranslationMethod.BEFORE_FIRST_SYNC:
        return made(translation.downstream_offset, translation.method, translation.reason)
    first = copy.offset_map.syncs[0]
    if upstream_offset >= copy.source_log_start:
        # The first batch read from the log start (<= U): nothing committed lies in [U, first.up).
        return made(first.downstream_offset, FIRST_COPIED_RECORD,
                    f"below the first sync {tuple(first)}, at or above the source log start "
                    f"{copy.source_log_start}: no committed record in between, resume at the first copied record")
    return made(first.downstream_offset, BELOW_LOG_START,
                f"below the source log start {copy.source_log_start} (the source consumer would reset too): "
                f"first copied record {tuple(first)}")


def translate_groups(commits: Mapping[str, Mapping[tuple[str, int], tuple[int, str]]],
                     copies: Mapping[tuple[str, int], PartitionCopy],
                     topics: Iterable[str] | None = None) -> list[OffsetDecision]:
    """Decisions for every group's committed offsets, sorted; ``topics`` limits to migrated source topics."""
    wanted = None if topics is None else set(topics)
    decisions = []
    for group in sorted(commits):
        for (topic, partition), (offset, metadata) in sorted(commits[group].items()):
            if wanted is not None and topic not in wanted:
                continue
            decisions.append(decide(group, offset, metadata, copies.get((topic, partition)), topic, partition))
    return decisions
