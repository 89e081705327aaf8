"""After a catch-up batch: do the records just copied decode on the destination, against its registry?

Why after every batch, and why here: a remap migration rewrites schema ids in flight, a preserve migration
relies on the destination keeping ids; either way the proof a tenant needs is that its consumers, pointed at
the destination cluster and registry, can read what is there. So each batch reads the destination records
the copy wrote since the last check and decodes every wire-format key and value (`core.schemas.schema_decode`).

Which records: per copied partition, from the partition's mark (kind `decode-check`: the next destination
offset to check) to one past the copy's last destination offset (progress record). A partition checked for
the first time starts at its earliest offset. The mark moves only after the whole range was read, so a run
cut short checks the same records again; every copied record is checked at least once, in order.

What it keeps: the mark and running totals per destination partition, and for this run per topic totals and
the first failures (topic, partition, offset, key or value, schema id, reason), which the run page shows.

Given the source registry, a failure is classified (`core.schemas.decode_faults`): decoding on the source makes it
the migration's fault. A partition with one keeps its mark where it was (the next run checks the same records
again, after the fix) and records the fault in the mark, which blocks promotion while it stands.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kafka_ferry.core.common.state_records import partition_key
from kafka_ferry.core.schemas.decode_faults import MIGRATION_FAULT_FIELD, FaultClassifier, describe
from kafka_ferry.core.schemas.schema_decode import CHECKS, PLAIN, PayloadChecker
from kafka_ferry.core.schemas.serialized_fields import FieldDecision
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.reads import consumed_partition, read_ranges
from kafka_ferry.registry.client import SchemaRegistry
from kafka_ferry.state.decode_marks import decode_marks, save_decode_marks
from kafka_ferry.state.progress import read_progress

log = logging.getLogger(__name__)

FAILURES_KEPT = 20  # per run, in the report; the totals count them all


@dataclass
class TopicTally:
    records: int = 0
    values_decoded: int = 0
    keys_decoded: int = 0
    plain: int = 0  # keys and values without the wire-format header, or in a field not registry-serialized
    failed: int = 0  # records with a key or value that did not decode
    schema_types: dict[str, int] = field(default_factory=dict)
    serialized: str = "both"  # the fields checked (core.schemas.serialized_fields); the others are counted plain


@dataclass
class DecodeCheckReport:
    batch_id: str
    topics: dict[str, TopicTally] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    ranges: dict[str, list[int]] = field(default_factory=dict)  # "<topic>:<partition>" -> [start, end)
    # per (topic, partition, field, destination id): decodes on the source, not on the destination
    migration_faults: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(t.failed for t in self.topics.values())

    def as_dict(self) -> dict[str, Any]:
        return {"batch_id": self.batch_id, "failed": self.failed, "checks": CHECKS,
                "topics": {t: asdict(tally) for t, tally in sorted(self.topics.items())},
                "failures": self.failures, "ranges": self.ranges, "migration_faults": self.migration_faults}

    def describe_failures(self) -> str:
        return "; ".join(f"{f['topic']}-{f['partition']}@{f['offset']} {f['field']} (schema id {f['schema_id']}): "
                         f"{f['reason']}" for f in self.failures[:5])


def ranges_to_check(destination: KafkaCluster, store) -> dict[tuple[str, int], tuple[int, int]]:
    """Per destination partition the copy has written to: [mark, last copied offset + 1)."""
    marks = decode_marks(store)
    copied = {(p.destination_topic, p.partition): p.last_downstream_offset + 1
              for p in read_progress(store).values() if p.last_downstream_offset is not None}
    unmarked = [tp for tp in copied if partition_key(*tp) not in marks]
    earliest = destination.list_offsets(unmarked, "earliest") if unmarked else {}
    ranges = {}
    for tp, end in copied.items():
        mark = marks.get(partition_key(*tp))
        start = int(mark["checked_through"]) if mark else earliest[tp]
        if end > start:
            ranges[tp] = (start, end)
    return ranges


def check_decoding(destination: KafkaCluster, registry: SchemaRegistry, store, batch_id: str,
                   ranges: Mapping[tuple[str, int], tuple[int, int]] | None = None,
                   fields: Mapping[str, FieldDecision] | None = None, source: SchemaRegistry | None = None,
                   id_map: Mapping[int, int] | None = None) -> DecodeCheckReport:
    """Decode the records in `ranges` (default: `ranges_to_check`), move the marks, return the run's report.

    `fields` (by destination topic) says which fields carry the registry wire format: only those are decoded;
    a long key that happens to start with 0x00 is not a schema id. A topic without a decision has both checked.
    With `source` (and the remap id map), failures that decode on the source are the migration's faults.
    """
    ranges = ranges_to_check(destination, store) if ranges is None else dict(ranges)
    fields = fields or {}
    check = PayloadChecker(registry.registered_schema).check
    blame = FaultClassifier(PayloadChecker(source.registered_schema).check, id_map) if source else None
    faults: dict[tuple, dict[str, Any]] = {}
    report = DecodeCheckReport(batch_id, ranges={partition_key(*tp): list(r) for tp, r in sorted(ranges.items())})
    # per partition: records, keys decoded, values decoded, keys/values without a header, failed records
    counts: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    types: dict[str, Counter] = defaultdict(Counter)
    for msg in read_ranges(destination, ranges):
        tp = consumed_partition(msg)
        c = counts[tp]
        c[0] += 1
        record_failed = False
        decision = fields.get(tp[0])
        for index, field_name, payload in ((1, "key", msg.key()), (2, "value", msg.value())):
            verdict = check(payload) if decision is None or getattr(decision, field_name) else PLAIN
            if verdict is PLAIN:
                c[3] += 1
            elif verdict.outcome == "decoded":
                c[index] += 1
                types[tp[0]][verdict.schema_type] += 1
            else:
                record_failed = True
                source_id = blame.source_id(payload) if blame is not None else None
                if source_id is not None:
                    # a consumed record has an offset; confluent-kafka's stubs declare it optional (a stub gap)
                    _note_fault(faults, tp, msg.offset(), field_name, verdict, source_id)  # type: ignore[arg-type]
                if len(report.failures) < FAILURES_KEPT:
                    report.failures.append({"topic": tp[0], "partition": tp[1], "offset": msg.offset(),
                                            "field": field_name, "schema_id": verdict.schema_id,
                                            "reason": verdict.reason})
        if record_failed:
            c[4] += 1
    per_partition = {}
    for tp, (records, keys, values, plain, failed) in counts.items():
        tally = report.topics.setdefault(tp[0], TopicTally())
        tally.records += records
        tally.keys_decoded += keys
        tally.values_decoded += values
        tally.plain += plain
        tally.failed += failed
        tally.schema_types = dict(sorted(types[tp[0]].items()))
        tally.serialized = fields[tp[0]].fields if tp[0] in fields else "both"
        per_partition[tp] = {"records": records, "decoded": keys + values, "plain": plain, "failed": failed}
    report.migration_faults = _named(list(faults.values()), source)
    _move_marks(store, ranges, per_partition, batch_id, report.migration_faults)
    for topic, tally in sorted(report.topics.items()):
        (log.error if tally.failed else log.info)(
            "decode check %s: %d record(s), %d value(s) and %d key(s) decoded, %d plain, %d failed", topic,
            tally.records, tally.values_decoded, tally.keys_decoded, tally.plain, tally.failed)
    return report


def _note_fault(faults: dict, tp, offset: int, field_name: str, verdict, source_id: int) -> None:
    key = (*tp, field_name, verdict.schema_id)
    fault = faults.setdefault(key, {"topic": tp[0], "partition": tp[1], "field": field_name,
                                    "schema_id": verdict.schema_id, "source_id": source_id, "records": 0,
                                    "offsets": [], "reason": verdict.reason})
    fault["records"] += 1
    if len(fault["offsets"]) < 5:
        fault["offsets"].append(offset)


def _named(faults: list[dict[str, Any]], source: SchemaRegistry | None) -> list[dict[str, Any]]:
    """Each fault with the source subject(s) and version(s) of its source id (asked once per id)."""
    known: dict[int, list] = {}
    for fault in faults:
        if fault["source_id"] not in known:
            assert source is not None  # a fault is noted only when a source registry could blame it
            known[fault["source_id"]] = [list(v) for v in source.versions_of_id(fault["source_id"])]
        fault["source_versions"] = known[fault["source_id"]]
        fault["description"] = describe(fault)
    return faults


def _move_marks(store, ranges, per_partition, batch_id: str, faults: Sequence[dict[str, Any]] = ()) -> None:
    """The next offset to check, and the partition's running totals, once its whole range was read.

    A partition with a migration fault keeps its offset (checked again next run) and records the fault."""
    if not ranges:
        return
    marks = decode_marks(store)
    faulted: dict[tuple[str, int], list[str]] = defaultdict(list)
    for fault in faults:
        faulted[(fault["topic"], fault["partition"])].append(fault["description"])
    updates = {}
    for tp, (start, end) in ranges.items():
        before = marks.get(partition_key(*tp)) or {}
        if tp in faulted:  # checked again from the same offset next run; totals unchanged until then
            updates[partition_key(*tp)] = {"checked_through": start, "records": 0, "decoded": 0, "plain": 0,
                                           "failed": 0, **before, "destination_topic": tp[0], "partition": tp[1],
                                           "batch_id": batch_id, MIGRATION_FAULT_FIELD: "; ".join(faulted[tp])}
            continue
        counts = per_partition.get(tp, {})
        updates[partition_key(*tp)] = {
            "destination_topic": tp[0], "partition": tp[1], "checked_through": end, "batch_id": batch_id,
            **{k: int(before.get(k, 0)) + counts.get(k, 0) for k in ("records", "decoded", "plain", "failed")}}
    save_decode_marks(store, updates)
