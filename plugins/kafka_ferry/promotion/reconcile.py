"""Reconciliation: per partition, the committed source records in the copied range vs the destination's.

Why before promotion: translation trusts the sync log; this checks the data itself. The source range is
``[source log start, progress.next_upstream_offset)``; the destination range starts where that log
start translates to and runs to the destination's end, so records the destination holds beyond the
progress (a crashed batch) count as a difference too. Both sides are read with read_committed; counts
and ``PartitionDigest``s must be equal, and a mismatch names the first differing position.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE

from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.offsets.offset_decisions import PartitionCopy, decide
from kafka_ferry.core.schemas.serialized_fields import RecordRewriter
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.kafka.reads import consumed_partition, read_ranges
from kafka_ferry.promotion.digest import PartitionDigest, encode_record
from kafka_ferry.state.progress import read_progress
from kafka_ferry.state.schema_ids import record_rewriter
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import load_partition_copies

log = logging.getLogger(__name__)


class NoDestinationStart(Retryable, RuntimeError):
    """A copied partition whose first source record has no destination offset: its ranges cannot be compared."""


class ReconciliationMismatch(Retryable, RuntimeError):
    """Source and destination differ; ``report`` names every differing partition."""

    def __init__(self, report: ReconciliationReport) -> None:
        self.report = report
        bad = report.mismatched
        super().__init__(f"reconciliation failed for {len(bad)} partition(s): "
                         + "; ".join(p.describe() for p in bad[:20]))


@dataclass(frozen=True)
class PartitionReconciliation:
    source_topic: str
    partition: int
    destination_topic: str
    source_range: tuple[int, int]
    destination_range: tuple[int, int]
    source_count: int
    destination_count: int
    source_digest: str
    destination_digest: str
    first_difference: dict | None = None  # {"index", "source_offset", "destination_offset"}

    @property
    def matches(self) -> bool:
        return self.source_count == self.destination_count and self.source_digest == self.destination_digest

    def describe(self) -> str:
        where = f", first difference {self.first_difference}" if self.first_difference else ""
        return (f"{self.source_topic}-{self.partition} {list(self.source_range)}: {self.source_count} records vs "
                f"{self.destination_topic}-{self.partition} {list(self.destination_range)}: "
                f"{self.destination_count} records, digests {'equal' if self.matches else 'differ'}{where}")

    def as_dict(self) -> dict:
        # shallow (its ranges are tuples, its first difference a dict nobody changes): ``asdict`` deep-copies every
        # value, and the report's 2,000 rows were a second of the cutover
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "matches": self.matches}


@dataclass(frozen=True)
class ReconciliationReport:
    partitions: tuple[PartitionReconciliation, ...]

    @property
    def mismatched(self) -> list[PartitionReconciliation]:
        return [p for p in self.partitions if not p.matches]

    @property
    def ok(self) -> bool:
        return not self.mismatched

    def as_dict(self) -> dict:
        return {"ok": self.ok, "partitions_checked": len(self.partitions),
                "mismatched": [f"{p.source_topic}:{p.partition}" for p in self.mismatched],
                "records_checked": sum(p.source_count for p in self.partitions),
                "partitions": [p.as_dict() for p in self.partitions]}

    def raise_if_mismatched(self) -> None:
        if not self.ok:
            raise ReconciliationMismatch(self)


class _Side:
    """Digest plus a short hash per record, to locate the first difference."""

    def __init__(self) -> None:
        self.digest = PartitionDigest()
        self.records: list[tuple[int, bytes]] = []

    def add(self, msg, schema_ids: RecordRewriter | None = None) -> None:
        # Every timestamp must survive the copy: the mirror is CreateTime while copying, so a LogAppendTime
        # source record's append time is stored as it is (its destination copy reads as CreateTime).
        kind, ts = msg.timestamp()
        ts = None if kind == TIMESTAMP_NOT_AVAILABLE else ts
        key, value = msg.key(), msg.value()
        if schema_ids is not None:  # remap mode: the copy changed exactly the 4 schema-id bytes of the topic's
            key, value = schema_ids.rewrite(msg.topic(), key, value)  # serialized fields, so does this
        self.digest.add(key, value, msg.headers(), ts)
        self.records.append((msg.offset(), hashlib.blake2b(encode_record(key, value, msg.headers(), ts),
                                                           digest_size=8).digest()))


def _first_difference(source: _Side, destination: _Side) -> dict | None:
    for i, (s, d) in enumerate(zip(source.records, destination.records, strict=False)):
        if s[1] != d[1]:
            return {"index": i, "source_offset": s[0], "destination_offset": d[0]}
    if len(source.records) != len(destination.records):
        i = min(len(source.records), len(destination.records))
        extra = source.records[i:] or destination.records[i:]
        side = "source" if len(source.records) > i else "destination"
        return {"index": i, f"{side}_offset": extra[0][0], "only_on": side}
    return None


def reconcile_copies(source: Cluster, destination: Cluster,
                     copies: Iterable[PartitionCopy], schema_ids: RecordRewriter | None = None
                     ) -> ReconciliationReport:
    """Source and destination ranges compared record by record; `schema_ids` maps source records' schema ids
    first (remap mode), in the fields the copy rewrote (the same per-topic decision) and with unknown ids
    passed through: the copy stops on those, so none is on both sides."""
    if schema_ids is not None:
        schema_ids = schema_ids.passing_through()
    copies = sorted(copies, key=lambda c: c.key)
    source_ranges: dict[tuple[str, int], tuple[int, int]] = {}
    dest_ranges: dict[tuple[str, int], tuple[int, int]] = {}
    for c in copies:
        source_ranges[c.key] = (c.source_log_start, max(c.source_log_start, c.copied_upstream_end))
        first = decide("reconcile", c.source_log_start, "", c)
        if first.downstream_offset is None:  # the copy has no place for its own first record: nothing to compare
            raise NoDestinationStart(f"{c.source_topic}-{c.partition}: the source log start "
                                     f"{c.source_log_start} has no destination offset ({first.reason})")
        start = first.downstream_offset
        dest_ranges[(c.destination_topic, c.partition)] = (start, max(start, c.downstream_end))

    def read_side(role: str, hook: Cluster, ranges: Mapping[tuple[str, int], tuple[int, int]],
                  mapped: RecordRewriter | None) -> dict[tuple[str, str, int], _Side]:
        side: dict[tuple[str, str, int], _Side] = {}
        for msg in read_ranges(hook, ranges):
            side.setdefault((role, *consumed_partition(msg)), _Side()).add(msg, mapped)
        return side

    # both clusters read at once (each its own consumer): the cutover waits for the slower side, not the sum
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="kferry-reconcile") as pool:
        source_side = pool.submit(read_side, "s", source, source_ranges, schema_ids)
        destination_side = pool.submit(read_side, "d", destination, dest_ranges, None)
        sides = {**source_side.result(), **destination_side.result()}
    results = []
    for c in copies:
        s = sides.get(("s", c.source_topic, c.partition), _Side())
        d = sides.get(("d", c.destination_topic, c.partition), _Side())
        r = PartitionReconciliation(c.source_topic, c.partition, c.destination_topic, source_ranges[c.key],
                                    dest_ranges[(c.destination_topic, c.partition)], s.digest.count,
                                    d.digest.count, s.digest.hexdigest, d.digest.hexdigest)
        if not r.matches:
            r = PartitionReconciliation(**{**asdict(r), "first_difference": _first_difference(s, d)})
            log.warning("reconcile: MISMATCH %s", r.describe())
        else:
            log.debug("reconcile: ok %s", r.describe())
        results.append(r)
    report = ReconciliationReport(tuple(results))
    log.info("reconcile: %d partition(s), %d record(s) checked, %d mismatched", len(results),
             sum(p.source_count for p in results), len(report.mismatched))
    return report


def reconcile(spec: MigrationSpec, source: Cluster, destination: Cluster,
              store: MigrationStateStore, copies: Mapping[tuple[str, int], PartitionCopy] | None = None
              ) -> ReconciliationReport:
    """Reconcile every partition the copy has progress for."""
    if copies is None:
        copies = load_partition_copies(spec, source, destination, read_progress(store))
    return reconcile_copies(source, destination, copies.values(), record_rewriter(spec, store))


def range_digests(cluster: Cluster, ranges: Mapping[tuple[str, int], tuple[int, int]],
                  schema_ids: RecordRewriter | None = None) -> dict[tuple[str, int], tuple[int, str]]:
    """(count, digest) of each ``(topic, partition) -> [start, end)`` read again, as the reconciliation computed
    them (``verify-evidence`` compares a bundle's reconciliation with the clusters as they are now)."""
    if schema_ids is not None:
        schema_ids = schema_ids.passing_through()
    sides: dict[tuple[str, int], _Side] = {tp: _Side() for tp in ranges}
    for msg in read_ranges(cluster, ranges):
        sides[(str(msg.topic()), int(msg.partition() or 0))].add(msg, schema_ids)
    return {tp: (side.digest.count, side.digest.hexdigest) for tp, side in sides.items()}
