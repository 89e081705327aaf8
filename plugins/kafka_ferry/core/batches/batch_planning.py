"""Which upstream offset range of each partition the next copy batch reads (the ranges of ``copy.plan.CopyPlan``).

Why pure: the DAG plans, the Spark job executes and a retry must re-run the *same* plan, so the plan is
plain data with a deterministic ``batch_id``. Offsets are upstream (source) offsets; ranges are
half-open ``[start, end)`` and end at most at the source's last stable offset, so a read_committed copy
never waits on open transactions. Records lost to source retention before they were copied are never
skipped silently: they raise ``RetentionGapError`` unless the caller accepts them, and then the plan
records them.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafka_ferry.core.batches.batch_window import fair_split
from kafka_ferry.core.common.failures import Permanent


class RetentionGapError(Permanent, RuntimeError):
    """Source retention deleted records that were never copied; ``gaps`` lists every lost range."""

    def __init__(self, gaps: Sequence[RetentionGap]) -> None:
        self.gaps = tuple(gaps)
        lines = "; ".join(
            f"{g.topic}-{g.partition} [{g.lost_start}, {g.lost_end}) {g.lost_count} offsets" for g in gaps
        )
        super().__init__(
            f"{len(self.gaps)} partition(s) lost uncopied records to source retention: {lines}. "
            "Re-run with accept_retention_gaps=True to skip them and record the loss."
        )


def _check_int(where: str, name: str, value: object, minimum: int = 0) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{where}: {name} must be an int >= {minimum}, got {value!r}")


def _check_partition(topic: object, partition: object) -> str:
    where = f"{topic}-{partition}"
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"{where}: topic must be a non-empty str, got {topic!r}")
    _check_int(where, "partition", partition)
    return where


@dataclass(frozen=True)
class PartitionPosition:
    """Where the copy of one partition stands, and what the source holds right now.

    ``stored_next_offset`` is the next upstream offset to copy (None: never copied), ``end_offset`` the
    source's last stable offset (read_committed end).
    """

    topic: str
    partition: int
    stored_next_offset: int | None
    log_start_offset: int
    end_offset: int

    def __post_init__(self) -> None:
        where = _check_partition(self.topic, self.partition)
        _check_int(where, "log_start_offset", self.log_start_offset)
        _check_int(where, "end_offset", self.end_offset)
        if self.end_offset < self.log_start_offset:
            raise ValueError(f"{where}: end_offset {self.end_offset} < log_start_offset {self.log_start_offset}")
        if self.stored_next_offset is not None:
            _check_int(where, "stored_next_offset", self.stored_next_offset)
            if self.stored_next_offset > self.end_offset:
                raise ValueError(
                    f"{where}: stored_next_offset {self.stored_next_offset} is beyond the source end "
                    f"{self.end_offset} (source truncated or topic recreated?)"
                )


@dataclass(frozen=True)
class PartitionRange:
    """Upstream offsets ``[start_offset, end_offset)`` of one partition to copy in this batch."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int

    def __post_init__(self) -> None:
        where = _check_partition(self.topic, self.partition)
        _check_int(where, "start_offset", self.start_offset)
        _check_int(where, "end_offset", self.end_offset)
        if self.end_offset < self.start_offset:
            raise ValueError(f"{where}: end_offset {self.end_offset} < start_offset {self.start_offset}")

    @property
    def offset_count(self) -> int:
        """Offsets in the range: an upper bound on records (holes, transaction markers)."""
        return self.end_offset - self.start_offset


@dataclass(frozen=True)
class RetentionGap:
    """Upstream offsets ``[lost_start, lost_end)`` deleted by source retention before being copied."""

    topic: str
    partition: int
    lost_start: int
    lost_end: int

    def __post_init__(self) -> None:
        where = _check_partition(self.topic, self.partition)
        _check_int(where, "lost_start", self.lost_start)
        if self.lost_end <= self.lost_start:
            raise ValueError(f"{where}: retention gap [{self.lost_start}, {self.lost_end}) is empty")

    @property
    def lost_count(self) -> int:
        return self.lost_end - self.lost_start


def plan_ranges(
    positions: Iterable[PartitionPosition],
    max_records_per_partition: int,
    max_bytes_per_partition: int | None = None,
    accept_retention_gaps: bool = False,
    records_budget: int | None = None,
    consumed_below: Mapping[tuple[str, int], int] | None = None,
) -> tuple[str, tuple[PartitionRange, ...], tuple[RetentionGap, ...]]:
    """The next batch's ``(batch_id, ranges, gaps)`` from each partition's stored position and the source's
    current offsets. Ranges come biggest first (Spark schedules the long tasks early); the byte cap only
    enters the id (the copier applies it, as sizes are unknown before reading). ``records_budget`` (a window's,
    ``core.batches.batch_window``): the ranges together hold at most that many offsets, split max-min fairly.

    ``consumed_below``: per partition, an offset below which every record was consumed and may be purged by its
    only reader (a Kafka Streams application's repartition topic, which Streams purges up to its own committed
    offset: ``core.units.streams_apps``). A gap ending at or below it is no loss: it is returned (the ledger records it,
    progress moves past it) but refuses nothing, since no reader on the destination will ask for those offsets. A
    gap reaching above it is a loss like any other."""
    _check_int("plan", "max_records_per_partition", max_records_per_partition, minimum=1)
    if max_bytes_per_partition is not None:
        _check_int("plan", "max_bytes_per_partition", max_bytes_per_partition, minimum=1)
    ranges: list[PartitionRange] = []
    gaps: list[RetentionGap] = []
    seen: set[tuple[str, int]] = set()
    for pos in positions:
        if (pos.topic, pos.partition) in seen:
            raise ValueError(f"{pos.topic}-{pos.partition}: partition given twice")
        seen.add((pos.topic, pos.partition))
        start = pos.log_start_offset if pos.stored_next_offset is None else pos.stored_next_offset
        if start < pos.log_start_offset:
            gaps.append(RetentionGap(pos.topic, pos.partition, start, pos.log_start_offset))
            start = pos.log_start_offset
        end = min(pos.end_offset, start + max_records_per_partition)
        if end > start:
            ranges.append(PartitionRange(pos.topic, pos.partition, start, end))
    gaps.sort(key=lambda g: (g.topic, g.partition))
    consumed = consumed_below or {}
    lost = [g for g in gaps if g.lost_end > consumed.get((g.topic, g.partition), -1)]
    if lost and not accept_retention_gaps:
        raise RetentionGapError(lost)
    if records_budget is not None:
        _check_int("plan", "records_budget", records_budget)
        shares = fair_split([r.offset_count for r in ranges], records_budget)
        ranges = [PartitionRange(r.topic, r.partition, r.start_offset, r.start_offset + share)
                  for r, share in zip(ranges, shares, strict=True) if share > 0]
    ranges.sort(key=lambda r: (-r.offset_count, r.topic, r.partition))
    batch_id = compute_batch_id(ranges, gaps, max_records_per_partition, max_bytes_per_partition)
    return batch_id, tuple(ranges), tuple(gaps)


def compute_batch_id(
    ranges: Iterable[PartitionRange],
    gaps: Iterable[RetentionGap] = (),
    max_records_per_partition: int | None = None,
    max_bytes_per_partition: int | None = None,
) -> str:
    """Same ranges, gaps and caps (in any order) -> same id, so a retried plan keeps its identity."""
    canonical = {
        "ranges": sorted([r.topic, r.partition, r.start_offset, r.end_offset] for r in ranges),
        "gaps": sorted([g.topic, g.partition, g.lost_start, g.lost_end] for g in gaps),
        "max_records": max_records_per_partition,
        "max_bytes": max_bytes_per_partition,
    }
    digest = hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode("utf-8")).hexdigest()
    return f"batch-{digest[:20]}"


def split_into_task_groups(ranges: Iterable[PartitionRange], task_count: int) -> tuple[tuple[PartitionRange, ...], ...]:
    """Balance ranges over at most ``task_count`` groups by offset count; a partition is never split.

    Longest-first greedy onto the lightest group, so the heaviest group is at most the ideal share plus
    one range. Empty groups are dropped; groups are returned heaviest first, each biggest range first.
    """
    _check_int("split", "task_count", task_count, minimum=1)
    ordered = sorted(ranges, key=lambda r: (-r.offset_count, r.topic, r.partition))
    keys = [(r.topic, r.partition) for r in ordered]
    if len(set(keys)) != len(keys):
        raise ValueError("a partition appears in more than one range; it would be split across tasks")
    groups: list[list[PartitionRange]] = [[] for _ in range(min(task_count, len(ordered)))]
    heap = [(0, index) for index in range(len(groups))]
    for r in ordered:
        load, index = heapq.heappop(heap)
        groups[index].append(r)
        heapq.heappush(heap, (load + r.offset_count, index))
    loads = {index: load for load, index in heap}
    by_load = sorted(range(len(groups)), key=lambda index: (-loads[index], index))
    return tuple(tuple(groups[index]) for index in by_load)
