"""The transaction coordinator's log (``__transaction_state``): its key and value wire formats, and what they say
about which topics one ``transactional.id`` writes together.

Why: a transactional producer that writes several topics in one transaction couples them: promoting one of them
while the producer still writes the others on the source splits its transactions across clusters
(``core.units.coupling``). The coordinator records every transaction's partitions in this compacted log, so reading it
is the one place the couplings can be seen without asking the applications.

The formats are Kafka's generated-message encoding (``TransactionLogKey`` / ``TransactionLogValue``), each record
prefixed by its INT16 version, declared once below as :class:`Struct` values and never packed ad hoc:

* key, version 0 (the only one): ``TransactionalId`` STRING (INT16 length, UTF-8).
* value, version 0 (fixed-width, written by 3.x coordinators): ``ProducerId`` INT64, ``ProducerEpoch`` INT16,
  ``TransactionTimeoutMs`` INT32, ``TransactionStatus`` INT8, ``TransactionPartitions`` nullable ARRAY (INT32
  count, -1 null) of {``Topic`` STRING, ``PartitionIds`` ARRAY of INT32}, ``TransactionLastUpdateTimestampMs``
  INT64, ``TransactionStartTimestampMs`` INT64.
* value, version 1 (flexible, KIP-915; written once the cluster runs transaction version 2 of KIP-890): the same
  fields with COMPACT strings and arrays (UNSIGNED_VARINT length + 1, 0 null) and a tagged-field section after the
  partition struct and after the value: tag 0 ``PreviousProducerId`` INT64, tag 1 ``NextProducerId`` INT64, tag 2
  ``ClientTransactionVersion`` INT16. A tag this code does not know is skipped by its size, as Kafka does.

Decoding is strict otherwise: a truncated record, trailing bytes or an unknown version raise
:class:`~kafka_ferry.core.offsets.mm2_wire.WireFormatError` naming the layout, field and byte position.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_ferry.core.offsets.mm2_wire import INT16, INT32, INT64, STRING, WireFormatError, _IntType

TRANSACTION_STATE_TOPIC = "__transaction_state"
INT8 = _IntType("INT8", struct.Struct(">b"))

# TransactionStatus values (Kafka's TransactionState ids)
STATUS_NAMES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


class _UnsignedVarint:
    name = "UNSIGNED_VARINT"
    MAX_BYTES = 5  # a 32-bit value

    def encode(self, where: str, value: int) -> bytes:
        if not isinstance(value, int) or not 0 <= value < 2**32:
            raise WireFormatError(f"{where} ({self.name}) value {value!r} is not in [0, 2**32)")
        out = bytearray()
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        return bytes(out)

    def decode(self, where: str, data: bytes, pos: int) -> tuple[int, int]:
        value = shift = 0
        for i in range(self.MAX_BYTES):
            if pos + i >= len(data):
                raise WireFormatError(f"{where} ({self.name}) truncated at byte {pos + i}")
            byte = data[pos + i]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value, pos + i + 1
            shift += 7
        raise WireFormatError(f"{where} ({self.name}) longer than {self.MAX_BYTES} bytes at byte {pos}")


UVARINT = _UnsignedVarint()


class _CompactString:
    """UNSIGNED_VARINT length + 1, then UTF-8; not nullable (0 is rejected)."""

    name = "COMPACT_STRING"

    def encode(self, where: str, value: Any) -> bytes:
        if not isinstance(value, str):
            raise WireFormatError(f"{where} ({self.name}) must be a str, got {value!r}")
        raw = value.encode("utf-8", "strict")
        if len(raw) > 32767:
            raise WireFormatError(f"{where} ({self.name}) is {len(raw)} UTF-8 bytes, max 32767")
        return UVARINT.encode(where, len(raw) + 1) + raw

    def decode(self, where: str, data: bytes, pos: int) -> tuple[str, int]:
        length, pos = UVARINT.decode(f"{where} length", data, pos)
        if length == 0:
            raise WireFormatError(f"{where} ({self.name}) is null; null strings are not allowed")
        end = pos + length - 1
        if end > len(data):
            raise WireFormatError(f"{where} ({self.name}) truncated: length {length - 1} at byte {pos}, "
                                  f"only {len(data) - pos} left")
        try:
            return data[pos:end].decode("utf-8"), end
        except UnicodeDecodeError as exc:
            raise WireFormatError(f"{where} ({self.name}) is not valid UTF-8: {exc}") from exc


COMPACT_STRING = _CompactString()


@dataclass(frozen=True)
class Array:
    """An array of ``item``: INT32 count (-1 null) or, compact, UNSIGNED_VARINT count + 1 (0 null)."""

    item: Any
    compact: bool = False
    nullable: bool = False

    @property
    def name(self) -> str:
        return f"{'COMPACT_' if self.compact else ''}{'NULLABLE_' if self.nullable else ''}ARRAY[{self.item.name}]"

    def encode(self, where: str, value: Any) -> bytes:
        if value is None:
            if not self.nullable:
                raise WireFormatError(f"{where} ({self.name}) is not nullable")
            return UVARINT.encode(where, 0) if self.compact else INT32.encode(where, -1)
        count = UVARINT.encode(where, len(value) + 1) if self.compact else INT32.encode(where, len(value))
        return count + b"".join(self.item.encode(f"{where}[{i}]", v) for i, v in enumerate(value))

    def decode(self, where: str, data: bytes, pos: int) -> tuple[list[Any] | None, int]:
        if self.compact:
            count, pos = UVARINT.decode(f"{where} count", data, pos)
            count -= 1
        else:
            count, pos = INT32.decode(f"{where} count", data, pos)
        if count < 0:
            if count == -1 and self.nullable:
                return None, pos
            raise WireFormatError(f"{where} ({self.name}) has count {count} at byte {pos}")
        if count > len(data) - pos:  # every item takes a byte at least: a huge count is a corrupt record
            raise WireFormatError(f"{where} ({self.name}) count {count} exceeds the {len(data) - pos} bytes left")
        out = []
        for i in range(count):
            item, pos = self.item.decode(f"{where}[{i}]", data, pos)
            out.append(item)
        return out, pos


@dataclass(frozen=True)
class Field:
    name: str
    type: Any


@dataclass(frozen=True)
class Struct:
    """Named fields back to back; ``flexible`` adds a tagged-field section (``tagged``: tag -> field, with the
    default a missing tag means) after them."""

    name: str
    fields: tuple[Field, ...]
    flexible: bool = False
    tagged: Mapping[int, tuple[Field, Any]] = field(default_factory=dict)

    def encode(self, where: str, value: Mapping[str, Any]) -> bytes:
        parts = [f.type.encode(f"{self.name} field {f.name!r}", value[f.name]) for f in self.fields]
        if self.flexible:
            tags = [(tag, f, default) for tag, (f, default) in sorted(self.tagged.items())
                    if value.get(f.name, default) != default]
            parts.append(UVARINT.encode(where, len(tags)))
            for tag, f, _ in tags:
                raw = f.type.encode(f"{self.name} tag {tag} {f.name!r}", value[f.name])
                parts += [UVARINT.encode(where, tag), UVARINT.encode(where, len(raw)), raw]
        return b"".join(parts)

    def decode(self, where: str, data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        for f in self.fields:
            out[f.name], pos = f.type.decode(f"{self.name} field {f.name!r}", data, pos)
        if self.flexible:
            out.update({f.name: default for f, default in self.tagged.values()})
            count, pos = UVARINT.decode(f"{self.name} tag count", data, pos)
            last = -1
            for _ in range(count):
                tag, pos = UVARINT.decode(f"{self.name} tag", data, pos)
                size, pos = UVARINT.decode(f"{self.name} tag {tag} size", data, pos)
                if tag <= last:
                    raise WireFormatError(f"{self.name}: tag {tag} after tag {last} at byte {pos} (not ascending)")
                last = tag
                end = pos + size
                if end > len(data):
                    raise WireFormatError(f"{self.name} tag {tag} truncated: {size} bytes at byte {pos}, "
                                          f"only {len(data) - pos} left")
                if tag in self.tagged:
                    f = self.tagged[tag][0]
                    out[f.name], used = f.type.decode(f"{self.name} tag {tag} {f.name!r}", data, pos)
                    if used != end:
                        raise WireFormatError(f"{self.name} tag {tag} {f.name!r}: size {size} but the value took "
                                              f"{used - pos} bytes")
                pos = end  # an unknown tag is skipped by its size
        return out, pos


KEY_V0 = Struct("TransactionLogKey v0", (Field("TransactionalId", STRING),))
PARTITIONS_V0 = Struct("PartitionsSchema v0", (Field("Topic", STRING), Field("PartitionIds", Array(INT32))))
PARTITIONS_V1 = Struct("PartitionsSchema v1", (Field("Topic", COMPACT_STRING),
                                               Field("PartitionIds", Array(INT32, compact=True))), flexible=True)
_VALUE_HEAD = (Field("ProducerId", INT64), Field("ProducerEpoch", INT16), Field("TransactionTimeoutMs", INT32),
               Field("TransactionStatus", INT8))
_VALUE_TAIL = (Field("TransactionLastUpdateTimestampMs", INT64), Field("TransactionStartTimestampMs", INT64))
VALUE_V0 = Struct("TransactionLogValue v0", (
    *_VALUE_HEAD, Field("TransactionPartitions", Array(PARTITIONS_V0, nullable=True)), *_VALUE_TAIL))
VALUE_V1 = Struct("TransactionLogValue v1", (
    *_VALUE_HEAD, Field("TransactionPartitions", Array(PARTITIONS_V1, compact=True, nullable=True)), *_VALUE_TAIL),
    flexible=True, tagged={0: (Field("PreviousProducerId", INT64), -1), 1: (Field("NextProducerId", INT64), -1),
                           2: (Field("ClientTransactionVersion", INT16), 0)})
KEY_LAYOUTS = {0: KEY_V0}
VALUE_LAYOUTS = {0: VALUE_V0, 1: VALUE_V1}


def _versioned(what: str, layouts: Mapping[int, Struct], data: Any) -> tuple[int, dict[str, Any]]:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise WireFormatError(f"{what} must be bytes, got {type(data).__name__}")
    data = bytes(data)
    version, pos = INT16.decode(f"{what} version", data, 0)
    layout = layouts.get(version)
    if layout is None:
        raise WireFormatError(f"{what}: unknown version {version}, supported {sorted(layouts)}")
    out, pos = layout.decode(layout.name, data, pos)
    if pos != len(data):
        raise WireFormatError(f"{layout.name}: {len(data) - pos} trailing bytes after byte {pos} of {len(data)}")
    return version, out


@dataclass(frozen=True)
class TransactionState:
    """One value of ``__transaction_state``: a transactional.id's producer and the partitions of its current
    transaction (empty once completed)."""

    transactional_id: str
    version: int
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0

    @property
    def status_name(self) -> str:
        return STATUS_NAMES.get(self.status, f"unknown({self.status})")

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(t for t, _ in self.partitions or ())

    def value_bytes(self) -> bytes:
        """The value as a coordinator of this ``version`` writes it (tests pin it against captured bytes)."""
        layout = VALUE_LAYOUTS[self.version]
        parts = None if self.partitions is None else [{"Topic": t, "PartitionIds": list(p)}
                                                       for t, p in self.partitions]
        return INT16.encode("version", self.version) + layout.encode(layout.name, {
            "ProducerId": self.producer_id, "ProducerEpoch": self.producer_epoch,
            "TransactionTimeoutMs": self.timeout_ms, "TransactionStatus": self.status,
            "TransactionPartitions": parts, "TransactionLastUpdateTimestampMs": self.last_update_ms,
            "TransactionStartTimestampMs": self.start_ms, "PreviousProducerId": self.previous_producer_id,
            "NextProducerId": self.next_producer_id, "ClientTransactionVersion": self.client_transaction_version})

    def key_bytes(self) -> bytes:
        return transaction_key_bytes(self.transactional_id)


def transaction_key_bytes(transactional_id: str) -> bytes:
    return INT16.encode("version", 0) + KEY_V0.encode(KEY_V0.name, {"TransactionalId": transactional_id})


def decode_key(key: Any) -> str:
    """The transactional.id of a ``__transaction_state`` key."""
    return str(_versioned("TransactionLogKey", KEY_LAYOUTS, key)[1]["TransactionalId"])


def decode_record(key: Any, value: Any) -> tuple[str, TransactionState | None]:
    """(transactional.id, its state), or (id, None) for a tombstone (the id expired and was removed)."""
    tid = decode_key(key)
    if value is None:
        return tid, None
    version, v = _versioned("TransactionLogValue", VALUE_LAYOUTS, value)
    parts = v["TransactionPartitions"]
    return tid, TransactionState(
        transactional_id=tid, version=version, producer_id=v["ProducerId"], producer_epoch=v["ProducerEpoch"],
        timeout_ms=v["TransactionTimeoutMs"], status=v["TransactionStatus"],
        partitions=None if parts is None else tuple((p["Topic"], tuple(p["PartitionIds"])) for p in parts),
        last_update_ms=v["TransactionLastUpdateTimestampMs"], start_ms=v["TransactionStartTimestampMs"],
        previous_producer_id=v.get("PreviousProducerId", -1), next_producer_id=v.get("NextProducerId", -1),
        client_transaction_version=v.get("ClientTransactionVersion", 0))


@dataclass(frozen=True)
class TransactionLogReading:
    """What the records of ``__transaction_state`` read say: the topics each live transactional.id wrote in the
    transactions the log still holds, and the records that could not be decoded (counted, the first one named)."""

    writes: Mapping[str, frozenset[str]]
    records: int
    undecodable: int = 0
    first_problem: str | None = None


def read_transaction_log(records: Iterable[tuple[Any, Any]]) -> TransactionLogReading:
    """Fold the log's records, in offset order per partition (one id always lands on one partition): each value
    adds its transaction's topics to its id; a tombstone forgets the id (it expired: no producer uses it now).

    A record of a shape this code does not know is counted, not fatal: the log is the coordinator's own, and a
    newer broker may write a version this code predates; the pre-flight says how many it could not read."""
    writes: dict[str, set[str]] = {}
    count = bad = 0
    first: str | None = None
    for key, value in records:
        count += 1
        try:
            tid, state = decode_record(key, value)
        except WireFormatError as exc:
            bad += 1
            first = first or str(exc)
            continue
        if state is None:
            writes.pop(tid, None)
        else:
            writes.setdefault(tid, set()).update(state.topics)
    return TransactionLogReading({t: frozenset(s) for t, s in writes.items() if s}, count, bad, first)
