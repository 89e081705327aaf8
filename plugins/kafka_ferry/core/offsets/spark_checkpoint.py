"""Spark Structured Streaming checkpoints: the offset log's file layout and where a query resumes on the destination.

Why: a Structured Streaming query keeps its Kafka position in its checkpoint directory, not in a consumer group, so
translating groups does not move it. Its position is the offset log: ``offsets/<batchId>`` (written before a batch
runs) and ``commits/<batchId>`` (written after it finished). A query restarts from its latest batch: when that batch
has a commit, the next batch starts at that batch's offsets. So a new committed batch whose Kafka offsets are the
destination's resumes the query on the destination exactly where it stopped on the source.

The layouts, as Spark writes them (``OffsetSeqLog``, ``CommitLog``, ``HDFSMetadataLog``; UTF-8, lines joined by
``\\n``, no newline at the end):

* ``offsets/<N>`` version 1: ``v1``, the metadata JSON line (``OffsetSeqMetadata``: watermark, batch timestamp,
  session conf; may be empty), then one line per source in the query's source order: the source's offset JSON, or
  ``-`` for a source without an offset. Version 2: ``v2``, metadata, then ``<sourceId>:<offset JSON or ->``.
* A Kafka source's offset JSON (``KafkaSourceOffset``, ``JsonUtils.partitionOffsets``):
  ``{"<topic>":{"<partition>":<next offset to read>,...},...}``, compact.
* ``commits/<N>``: ``v1`` or ``v2``, then one JSON line (``{"nextBatchWatermarkMs":0}``; v2 adds state store ids).
* ``sources/<i>/0``: a source's initial offsets, read only before the first batch; never touched here.

The decision per partition (``decide_position``) uses the offset map a translation exports (``offset-map.json``,
``translation.offset_map``), whose invariants it checks first (``parse_offset_map``):

  M1. runs of a partition ascend, do not overlap, and climb downstream (``downstream_first`` strictly increasing
      by at least the previous run's length);
  M2. the last run ends below ``copied_upstream_end``, and ``next_downstream_offset`` is after the last run.

A Spark position U is the next source offset to read. Exact outcomes: U inside a run (same distance downstream),
U in a hole between runs (no copied record there: the next run's first record), U after the last run up to the
copied end (``next_downstream_offset``: where the destination's copied data ends). Everything else is refused,
naming the partition, never guessed: U above the copied end (the query read what the copy did not), U below the
first copied record (lost to retention or never copied), a partition the map does not hold, an unresolved
position (Spark's -1/-2).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.offsets.offset_translation import TranslationMethod

OFFSETS_DIR: Final = "offsets"
COMMITS_DIR: Final = "commits"
SOURCES_DIR: Final = "sources"
VOID_OFFSET: Final = "-"
OFFSET_LOG_VERSIONS: Final = (1, 2)
COMMIT_LOG_VERSIONS: Final = (1, 2)
OFFSET_MAP_SCHEMA_VERSION: Final = 1
HANDOVER_SCHEMA_VERSION: Final = 1

# the exact methods and the refusal above the copied end are the group translation's own (one name per decision)
IN_RUN: Final = TranslationMethod.EXACT_RUN
BEFORE_COPY: Final = "before-first-copied-record"
NOT_IN_MAP: Final = "not-in-offset-map"
UNRESOLVED: Final = "unresolved-position"
EXACT_METHODS: Final = (IN_RUN, TranslationMethod.HOLE_NEXT_RECORD, TranslationMethod.AT_COPIED_END)
REFUSED_METHODS: Final = (TranslationMethod.AHEAD_OF_COPY, BEFORE_COPY, NOT_IN_MAP, UNRESOLVED)

_BATCH_ID = re.compile(r"0|[1-9][0-9]{0,18}")
_VERSION = re.compile(r"v([1-9][0-9]{0,8})")
_PARTITION = re.compile(r"0|[1-9][0-9]{0,9}")


class CheckpointFormatError(Permanent, ValueError):
    """A checkpoint or offset-map file is not in the layout Spark / kafka-ferry writes; names file and value."""


class HandOverRefused(Permanent, ValueError):
    """The checkpoint cannot be handed over as it is; the message says why and what to do. Nothing was changed."""


# ---------------------------------------------------------------------------------------------------- layouts


@dataclass(frozen=True)
class SourceLine:
    """One source's line of an offsets file: its offset JSON as Spark wrote it, or None for ``-``."""

    raw: str | None
    source_id: str | None = None  # version 2 only: the text before the first ':'

    def encode(self) -> str:
        text = VOID_OFFSET if self.raw is None else self.raw
        return text if self.source_id is None else f"{self.source_id}:{text}"


@dataclass(frozen=True)
class OffsetSeqFile:
    """``offsets/<batchId>``: version, the metadata line kept byte-exact, one line per source."""

    version: int
    metadata: str
    sources: tuple[SourceLine, ...]

    def encode(self) -> bytes:
        lines = [f"v{self.version}", self.metadata, *(s.encode() for s in self.sources)]
        return "\n".join(lines).encode("utf-8")


@dataclass(frozen=True)
class CommitFile:
    """``commits/<batchId>``: version and the metadata JSON line, kept byte-exact."""

    version: int
    metadata: str

    def encode(self) -> bytes:
        return f"v{self.version}\n{self.metadata}".encode()


def batch_id(name: str) -> int | None:
    """The batch id a log file's name holds, or None for anything else (Spark's temp and .crc files)."""
    return int(name) if _BATCH_ID.fullmatch(name) else None


def _lines(data: bytes, where: str) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointFormatError(f"{where}: not UTF-8 ({exc})") from None
    # Spark reads lines with scala.io.Source.getLines: '\n' or '\r\n' ends a line, a final newline adds no line
    lines = text.split("\n")
    if lines and lines[-1] == "" and text.endswith("\n"):
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _version(line: str, where: str, known: Sequence[int]) -> int:
    match = _VERSION.fullmatch(line.strip())
    if not match:
        raise CheckpointFormatError(f"{where}: first line {line[:40]!r} is not a log version ('v1', 'v2')")
    version = int(match[1])
    if version not in known:
        raise CheckpointFormatError(f"{where}: log version v{version} is newer than this kafka-ferry reads "
                                    f"({', '.join(f'v{v}' for v in known)}); nothing was changed")
    return version


def parse_offsets(data: bytes, where: str) -> OffsetSeqFile:
    """Read an ``offsets/<batchId>`` file; ``where`` names it in errors."""
    lines = _lines(data, where)
    if not lines or lines == [""]:
        raise CheckpointFormatError(f"{where}: empty (an incomplete log file)")
    version = _version(lines[0], where, OFFSET_LOG_VERSIONS)
    metadata = lines[1] if len(lines) > 1 else ""
    sources = []
    for number, line in enumerate(lines[2:], start=3):
        source_id = None
        if version == 2:
            source_id, colon, line = line.partition(":")
            if not colon:
                raise CheckpointFormatError(f"{where}: line {number} {source_id[:40]!r} is not '<sourceId>:<offset>'")
        sources.append(SourceLine(None if line == VOID_OFFSET else line, source_id))
    return OffsetSeqFile(version, metadata, tuple(sources))


def parse_commit(data: bytes, where: str) -> CommitFile:
    lines = _lines(data, where)
    if not lines or lines == [""]:
        raise CheckpointFormatError(f"{where}: empty (an incomplete commit log file)")
    version = _version(lines[0], where, COMMIT_LOG_VERSIONS)
    return CommitFile(version, lines[1] if len(lines) > 1 else "{}")


def parse_kafka_offset(raw: str | None) -> dict[str, dict[int, int]] | None:
    """A Kafka source's offset JSON as {topic: {partition: offset}}; None when the line is not a Kafka source's
    (another source kind, a void offset): such a line is kept as it is."""
    if raw is None:
        return None
    try:
        document = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(document, dict) or not document:
        return None
    out: dict[str, dict[int, int]] = {}
    for topic, partitions in document.items():
        if not isinstance(partitions, dict):
            return None
        parsed = {}
        for partition, offset in partitions.items():
            if not _PARTITION.fullmatch(partition) or not isinstance(offset, int) or isinstance(offset, bool):
                return None
            parsed[int(partition)] = offset
        out[topic] = parsed
    return out


def encode_kafka_offset(offsets: Mapping[str, Mapping[int, int]]) -> str:
    """The compact JSON Spark's Kafka source reads back; topics and partitions in order, so equal maps are equal
    bytes (a second rewrite compares them)."""
    ordered = {topic: {str(p): offsets[topic][p] for p in sorted(offsets[topic])} for topic in sorted(offsets)}
    return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False)


# ------------------------------------------------------------------------------------------------ offset map


@dataclass(frozen=True)
class MappedPartition:
    """One source partition of the offset map: its runs (upstream_first, upstream_last, downstream_first)."""

    source_topic: str
    partition: int
    destination_topic: str
    copied_upstream_end: int
    next_downstream_offset: int
    runs: tuple[tuple[int, int, int], ...] = ()
    _firsts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"{self.source_topic}-{self.partition}"
        previous = None
        for run in self.runs:
            up_first, up_last, down_first = run
            if min(run) < 0 or up_last < up_first:
                raise CheckpointFormatError(f"offset map {where}: run {list(run)} is not ascending offsets >= 0")
            if previous is not None:
                p_first, p_last, p_down = previous
                if up_first <= p_last or down_first < p_down + (p_last - p_first) + 1:
                    raise CheckpointFormatError(f"offset map {where}: run {list(run)} overlaps or does not climb "
                                                f"after {list(previous)} (invariant M1)")
            previous = run
        if previous is not None:
            if previous[1] >= self.copied_upstream_end:
                raise CheckpointFormatError(f"offset map {where}: last run {list(previous)} is not below "
                                            f"copied_upstream_end {self.copied_upstream_end} (invariant M2)")
            if self.next_downstream_offset != previous[2] + (previous[1] - previous[0]) + 1:
                raise CheckpointFormatError(f"offset map {where}: next_downstream_offset "
                                            f"{self.next_downstream_offset} is not after the last run "
                                            f"{list(previous)} (invariant M2)")
        object.__setattr__(self, "_firsts", tuple(r[0] for r in self.runs))


def _int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CheckpointFormatError(f"{where}: {value!r} is not an offset (an int >= 0)")
    return value


def parse_offset_map(document: Any, where: str) -> dict[tuple[str, int], MappedPartition]:
    """The partitions of an ``offset-map.json`` document, invariants checked; ``where`` names the file."""
    if not isinstance(document, dict) or not isinstance(document.get("partitions"), list):
        raise CheckpointFormatError(f"{where}: not an offset map (a JSON object with 'partitions')")
    version = document.get("schema_version", 1)
    if version != OFFSET_MAP_SCHEMA_VERSION:
        raise CheckpointFormatError(f"{where}: schema_version {version!r}: this kafka-ferry reads version "
                                    f"{OFFSET_MAP_SCHEMA_VERSION}")
    out: dict[tuple[str, int], MappedPartition] = {}
    for i, p in enumerate(document["partitions"]):
        at = f"{where} partitions[{i}]"
        if not isinstance(p, dict):
            raise CheckpointFormatError(f"{at}: not an object")
        topic, dest = p.get("source_topic"), p.get("destination_topic")
        if not isinstance(topic, str) or not isinstance(dest, str) or not topic or not dest:
            raise CheckpointFormatError(f"{at}: source_topic / destination_topic missing")
        runs = p.get("runs")
        if not isinstance(runs, list) or any(not isinstance(r, list) or len(r) != 3 for r in runs):
            raise CheckpointFormatError(f"{at}.runs: not a list of [upstream_first, upstream_last, downstream_first]")
        key = (topic, _int(p.get("partition"), f"{at}.partition"))
        if key in out:
            raise CheckpointFormatError(f"{at}: {topic}-{key[1]} is listed twice")
        out[key] = MappedPartition(
            topic, key[1], dest, _int(p.get("copied_upstream_end"), f"{at}.copied_upstream_end"),
            _int(p.get("next_downstream_offset"), f"{at}.next_downstream_offset"),
            tuple((_int(r[0], f"{at}.runs"), _int(r[1], f"{at}.runs"), _int(r[2], f"{at}.runs")) for r in runs))
    return out


# -------------------------------------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class PositionDecision:
    """Where one Kafka partition of a checkpoint resumes on the destination, and why; refused ones have no offset."""

    source_topic: str
    partition: int
    upstream_offset: int
    destination_topic: str | None
    downstream_offset: int | None
    method: str
    reason: str

    def __post_init__(self) -> None:
        if self.method not in EXACT_METHODS + REFUSED_METHODS:
            raise ValueError(f"unknown method {self.method!r}")
        if (self.downstream_offset is None) != (self.method in REFUSED_METHODS):
            raise ValueError(f"method {self.method!r} with downstream_offset {self.downstream_offset!r}")

    @property
    def refused(self) -> bool:
        return self.method in REFUSED_METHODS

    def describe(self) -> str:
        to = "refused" if self.refused else f"-> {self.destination_topic}-{self.partition}@{self.downstream_offset}"
        return f"{self.source_topic}-{self.partition}@{self.upstream_offset} {to} [{self.method}] {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return {"source_topic": self.source_topic, "partition": self.partition, "upstream_offset": self.upstream_offset,
                "destination_topic": self.destination_topic, "downstream_offset": self.downstream_offset,
                "method": self.method, "reason": self.reason}


def decide_position(mapped: MappedPartition | None, topic: str, partition: int, offset: int) -> PositionDecision:
    """The destination offset a query at source ``offset`` (the next to read) resumes from, or a refusal."""
    def refuse(method: str, reason: str) -> PositionDecision:
        return PositionDecision(topic, partition, offset, mapped.destination_topic if mapped else None, None,
                                method, reason)

    if mapped is None:
        return refuse(NOT_IN_MAP, "the offset map holds no copy of this partition: it was not migrated")
    if offset < 0:
        return refuse(UNRESOLVED, f"position {offset} is Spark's earliest/latest marker, not an offset")
    made = mapped.destination_topic
    end = mapped.copied_upstream_end
    if offset > end:
        return refuse(TranslationMethod.AHEAD_OF_COPY, f"above the copied end {end}: the query read records the copy "
                      "has not copied (promote first: the final copy copies up to the source's end)")
    runs = mapped.runs
    if offset == end or (runs and offset > runs[-1][1]):
        return PositionDecision(topic, partition, offset, made, mapped.next_downstream_offset,
                                TranslationMethod.AT_COPIED_END,
                                f"at the copied end {end} (nothing copied in between): the destination's end of "
                                f"the copied data, {mapped.next_downstream_offset}")
    if not runs or offset < runs[0][0]:
        first = f"the first copied record {runs[0][0]}" if runs else "the copied end, with no record copied below it"
        return refuse(BEFORE_COPY, f"below {first}: the records from {offset} on were not copied (lost to retention "
                                   "or never on the source), so no destination offset holds this position")
    i = bisect_right(mapped._firsts, offset) - 1
    up_first, up_last, down_first = runs[i]
    if offset <= up_last:
        down = down_first + (offset - up_first)
        return PositionDecision(topic, partition, offset, made, down, IN_RUN,
                                f"inside run {list(runs[i])}: downstream_first + (U - upstream_first)")
    nxt = runs[i + 1]  # offset < runs[-1] end was handled above, so a next run exists
    return PositionDecision(topic, partition, offset, made, nxt[2], TranslationMethod.HOLE_NEXT_RECORD,
                            f"in the hole between runs {list(runs[i])} and {list(nxt)} (no copied record there): "
                            "the next run's first record")


@dataclass(frozen=True)
class SourceRewrite:
    """One source line of the batch: its decisions and new line, or why it is kept as it is."""

    index: int
    line: SourceLine
    decisions: tuple[PositionDecision, ...] = ()
    new_line: SourceLine | None = None
    kept_because: str = ""


@dataclass(frozen=True)
class RewritePlan:
    """The whole rewrite of one committed batch; ``refused`` non-empty means nothing may be written."""

    batch: int
    sources: tuple[SourceRewrite, ...]
    problems: tuple[str, ...] = ()

    @property
    def decisions(self) -> tuple[PositionDecision, ...]:
        return tuple(d for s in self.sources for d in s.decisions)

    @property
    def refused(self) -> tuple[str, ...]:
        return self.problems + tuple(d.describe() for d in self.decisions if d.refused)

    @property
    def rewrites_anything(self) -> bool:
        return any(s.new_line is not None for s in self.sources)

    def new_offsets(self, current: OffsetSeqFile) -> OffsetSeqFile:
        """The next batch's offsets file: metadata kept, Kafka sources of the migration rewritten."""
        if self.refused:
            raise HandOverRefused("the rewrite is refused: " + "; ".join(self.refused))
        lines = tuple(s.new_line or s.line for s in self.sources)
        return OffsetSeqFile(current.version, current.metadata, lines)

    def as_dict(self) -> dict[str, Any]:
        return {"from_batch": self.batch, "refused": list(self.refused),
                "sources": [{"index": s.index, "source_id": s.line.source_id, "rewritten": s.new_line is not None,
                             "kept_because": s.kept_because, "decisions": [d.as_dict() for d in s.decisions]}
                            for s in self.sources]}


def plan_rewrite(batch: int, offsets: OffsetSeqFile, mapped: Mapping[tuple[str, int], MappedPartition]
                 ) -> RewritePlan:
    """Decide every Kafka partition of the batch's sources. A source whose topics are none of the migration's is
    kept (another cluster's); a source mixing them is refused: half of it would read the wrong cluster."""
    migrated = {topic for topic, _ in mapped}
    sources, problems = [], []
    for index, line in enumerate(offsets.sources):
        kafka = parse_kafka_offset(line.raw)
        if kafka is None:
            sources.append(SourceRewrite(index, line, kept_because="not a Kafka source's offset"))
            continue
        ours = sorted(set(kafka) & migrated)
        if not ours:
            sources.append(SourceRewrite(index, line, kept_because="none of its topics is migrated"))
            continue
        others = sorted(set(kafka) - migrated)
        if others:
            problems.append(f"source {index} reads migrated topics {ours} and topics the migration does not copy "
                            f"{others}: one Kafka source reads one cluster, so it cannot be handed over; split the "
                            "query's source or migrate those topics too")
        decisions = tuple(decide_position(mapped.get((t, p)), t, p, o)
                          for t in sorted(kafka) for p, o in sorted(kafka[t].items()) if t in migrated)
        new_line = None
        if not any(d.refused for d in decisions) and not others:
            rewritten: dict[str, dict[int, int]] = {}
            for d in decisions:
                assert d.destination_topic is not None and d.downstream_offset is not None
                rewritten.setdefault(d.destination_topic, {})[d.partition] = d.downstream_offset
            new_line = SourceLine(encode_kafka_offset(rewritten), line.source_id)
        sources.append(SourceRewrite(index, line, decisions, new_line))
    return RewritePlan(batch, tuple(sources), tuple(problems))


# ------------------------------------------------------------------------------------------------ log state


@dataclass(frozen=True)
class LogState:
    """What the offset and commit logs' listings say: the batch to hand over, or why not."""

    latest_offsets: int | None
    latest_commit: int | None

    def committed_batch(self) -> int:
        """The latest batch with both offsets and a commit; raises HandOverRefused for a running query."""
        if self.latest_offsets is None:
            raise HandOverRefused("the checkpoint has no offsets/ batch: the query never ran a batch, so it holds no "
                                  "position to hand over (start it on the destination instead)")
        if self.latest_commit is None or self.latest_commit < self.latest_offsets:
            raise HandOverRefused(f"batch {self.latest_offsets} has offsets but no commit: the query is running (or "
                                  "stopped in the middle of a batch); stop it after a finished batch "
                                  "(query.stop() between triggers, or let it finish the batch) and run this again")
        if self.latest_commit > self.latest_offsets:
            raise HandOverRefused(f"commits/{self.latest_commit} has no offsets/{self.latest_commit}: not a "
                                  "checkpoint Spark wrote; nothing was changed")
        return self.latest_offsets


def log_state(offset_names: Iterable[str], commit_names: Iterable[str]) -> LogState:
    offsets = [b for b in map(batch_id, offset_names) if b is not None]
    commits = [b for b in map(batch_id, commit_names) if b is not None]
    return LogState(max(offsets, default=None), max(commits, default=None))


# ------------------------------------------------------------------------------------------- file sink metadata
# A file sink keeps its own log of the files each batch wrote (``FileStreamSinkLog`` in ``<sink>/_spark_metadata``:
# ``v1`` then one JSON line per file, every ``compactInterval``-th batch as ``<id>.compact`` holding the entries of
# the batches since the previous compaction too). Readers of the sink walk it batch by batch and fail on a missing
# one, so the batch the hand-over adds (it never runs) gets its entry: an empty one, or the compaction it is due.

SINK_METADATA_DIR: Final = "_spark_metadata"
COMPACT_SUFFIX: Final = ".compact"
DEFAULT_SINK_COMPACT_INTERVAL: Final = 10  # spark.sql.streaming.fileSink.log.compactInterval
EMPTY_SINK_ENTRY: Final = b"v1"


def sink_batch(name: str) -> tuple[int, bool] | None:
    """(batch id, is a compaction) of a sink metadata file name, or None for anything else."""
    compact = name.endswith(COMPACT_SUFFIX)
    number = batch_id(name.removesuffix(COMPACT_SUFFIX) if compact else name)
    return None if number is None else (number, compact)


def compact_interval(compactions: Iterable[int], default: int = DEFAULT_SINK_COMPACT_INTERVAL) -> int:
    """The interval Spark uses for a sink log with these compaction batch ids: the default before any; the distance
    of the latest two when there are two or more; with one (older ones deleted), one that divides the batch count up
    to it: that count when it is at most the default, else the smallest divisor at or above the default that is at
    most half the count (the count itself when there is none)."""
    latest = sorted(compactions, reverse=True)
    if not latest:
        return default
    if len(latest) >= 2:
        return latest[0] - latest[1]
    count = latest[0] + 1
    if count <= default:
        return count
    if default < count // 2:
        return next((i for i in range(default, count // 2 + 1) if count % i == 0), count)
    return count


def is_compaction(batch: int, interval: int) -> bool:
    return (batch + 1) % interval == 0


def sink_entries(data: bytes, where: str) -> list[str]:
    """The entry lines of one sink metadata file (after its version line)."""
    lines = _lines(data, where)
    if not lines or lines == [""]:
        raise CheckpointFormatError(f"{where}: empty (an incomplete sink log file)")
    _version(lines[0], where, (1,))
    return [line for line in lines[1:] if line]


def sink_compaction(entries: Iterable[str]) -> bytes:
    """A compaction file holding these entries, without files a ``delete`` entry removed."""
    kept = list(entries)
    deleted = set()
    for line in kept:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("action") == "delete":
            deleted.add(entry.get("path"))
    lines = [line for line in kept if not deleted or _entry_path(line) not in deleted]
    return "\n".join(["v1", *lines]).encode("utf-8")


def _entry_path(line: str) -> Any:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry.get("path") if isinstance(entry, dict) else None
