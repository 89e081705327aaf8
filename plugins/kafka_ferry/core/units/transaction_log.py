"""The transaction coordinator's log (``__transaction_state``): its key and value wire formats, and what they say
about which topics one ``transactional.id`` writes together.

Why: a transactional producer that writes several topics in one transaction couples them: promoting one of them
while the producer still writes the others on the source splits its transactions across clusters
(``core.units.coupling``). The coordinator records every transaction's partitions in this compacted log, so reading it
is the one place the couplings can be seen without asking the applications.

The formats are Kafka's generated-message encoding (``TransactionLogKey`` / ``TransactionLogValue``), each record
prefixed by its INT16 version, declared once below as :class:`Struct` values of ``core.common.kafka_wire``'s types
and never packed ad hoc:

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
:class:`~kafka_ferry.core.common.kafka_wire.WireFormatError` naming the layout, field and byte position.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_ferry.core.common.kafka_wire import COMPACT_STRING as COMPACT_STRING
from kafka_ferry.core.common.kafka_wire import INT8 as INT8
from kafka_ferry.core.common.kafka_wire import INT16, INT32, INT64, STRING
from kafka_ferry.core.common.kafka_wire import UVARINT as UVARINT
from kafka_ferry.core.common.kafka_wire import Array as Array
from kafka_ferry.core.common.kafka_wire import Field as Field
from kafka_ferry.core.common.kafka_wire import Struct as Struct
from kafka_ferry.core.common.kafka_wire import WireFormatError as WireFormatError

TRANSACTION_STATE_TOPIC = "__transaction_state"

# TransactionStatus values (Kafka's TransactionState ids)
STATUS_NAMES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


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
