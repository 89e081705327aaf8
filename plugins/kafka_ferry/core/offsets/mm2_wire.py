"""MirrorMaker 2 wire formats: offset syncs, checkpoints and heartbeats.

Why: kafka-ferry writes the internal topics MM2 reads (and reads the ones MM2 writes), so the bytes must be
Kafka's protocol ``Schema``/``Struct`` encoding: fields in declared order, big-endian, no tags, no total
length. Each record is declared once as a named :class:`Layout` (as MM2 declares ``KEY_SCHEMA`` and
``VALUE_SCHEMA_V0``) of ``core.common.kafka_wire``'s types, shared with the other Kafka formats; nothing is packed
ad hoc. Decoding is stricter than Kafka's reader: trailing bytes
are an error, so a record of an unknown shape is rejected instead of half-read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from kafka_ferry.core.common.kafka_wire import INT16 as INT16
from kafka_ferry.core.common.kafka_wire import INT32 as INT32
from kafka_ferry.core.common.kafka_wire import INT64 as INT64
from kafka_ferry.core.common.kafka_wire import STRING as STRING
from kafka_ferry.core.common.kafka_wire import STRING_MAX_BYTES as STRING_MAX_BYTES
from kafka_ferry.core.common.kafka_wire import Field as Field
from kafka_ferry.core.common.kafka_wire import Struct
from kafka_ferry.core.common.kafka_wire import WireFormatError as WireFormatError
from kafka_ferry.core.common.kafka_wire import as_bytes as _as_bytes
from kafka_ferry.core.common.kafka_wire import reject_trailing as _reject_trailing

CURRENT_VERSION = 0
# What a record's key or value is as a consumer hands it: None for a tombstone (refused, as anything not bytes-like).
RecordBytes = bytes | bytearray | memoryview | None


class Layout:
    """An ordered list of named fields, encoded back to back with no framing: a :class:`Struct` (non-flexible) with
    MM2's strictness on top: a value with an unknown or a missing field is refused, not half-written."""

    def __init__(self, name: str, *fields: Field) -> None:
        self.name = name
        self.fields = fields
        self.struct = Struct(name, fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{f.name} {f.type.name}" for f in self.fields)
        return f"Layout({self.name}: {inner})"

    def encode(self, values: Mapping[str, Any]) -> bytes:
        unknown = set(values) - {f.name for f in self.fields}
        if unknown:
            raise WireFormatError(f"{self.name}: unknown fields {sorted(unknown)}")
        return self.struct.encode(self.name, values)

    def decode_prefix(self, data: bytes, pos: int = 0) -> tuple[dict[str, Any], int]:
        """Decode the fields starting at ``pos``; return them and the position after the last one."""
        return self.struct.decode(self.name, data, pos)

    def decode(self, data: RecordBytes) -> dict[str, Any]:
        """Decode exactly ``data``: truncated or trailing bytes raise :class:`WireFormatError`."""
        data = _as_bytes(self.name, data)
        out, pos = self.decode_prefix(data)
        _reject_trailing(self.name, data, pos)
        return out


VERSION_HEADER = Layout("version header", Field("version", INT16))


def _encode_versioned(body: Layout, values: Mapping[str, Any]) -> bytes:
    return VERSION_HEADER.encode({"version": CURRENT_VERSION}) + body.encode(values)


def _decode_versioned(what: str, bodies: Mapping[int, Layout], data: Any) -> dict[str, Any]:
    """Read the INT16 version header, then the body layout registered for that version."""
    data = _as_bytes(what, data)
    header, pos = VERSION_HEADER.decode_prefix(data)
    body = bodies.get(header["version"])
    if body is None:
        raise WireFormatError(f"{what}: unknown version {header['version']}, supported {sorted(bodies)}")
    out, pos = body.decode_prefix(data, pos)
    _reject_trailing(body.name, data, pos)
    return out


OFFSET_SYNC_KEY = Layout("OffsetSync key", Field("topic", STRING), Field("partition", INT32))
OFFSET_SYNC_VALUE = Layout("OffsetSync value", Field("upstreamOffset", INT64), Field("offset", INT64))
CHECKPOINT_KEY = Layout("Checkpoint key", Field("group", STRING), Field("topic", STRING), Field("partition", INT32))
CHECKPOINT_VALUE_V0 = Layout(
    "Checkpoint value v0",
    Field("upstreamOffset", INT64),
    Field("offset", INT64),
    Field("metadata", STRING),
)
HEARTBEAT_KEY = Layout("Heartbeat key", Field("sourceClusterAlias", STRING), Field("targetClusterAlias", STRING))
HEARTBEAT_VALUE_V0 = Layout("Heartbeat value v0", Field("timestamp", INT64))


@dataclass(frozen=True)
class OffsetSync:
    """Upstream offset -> downstream offset of one copied record (``mm2-offset-syncs.<alias>.internal``)."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def __post_init__(self) -> None:
        self.key_bytes()  # fail at construction, not at produce time
        self.value_bytes()

    def key_bytes(self) -> bytes:
        return OFFSET_SYNC_KEY.encode({"topic": self.topic, "partition": self.partition})

    def value_bytes(self) -> bytes:
        return OFFSET_SYNC_VALUE.encode({"upstreamOffset": self.upstream_offset, "offset": self.downstream_offset})

    @classmethod
    def from_record(cls, key: RecordBytes, value: RecordBytes) -> OffsetSync:
        k, v = OFFSET_SYNC_KEY.decode(key), OFFSET_SYNC_VALUE.decode(value)
        return cls(k["topic"], k["partition"], v["upstreamOffset"], v["offset"])


@dataclass(frozen=True)
class Checkpoint:
    """A group's upstream committed offset and its downstream translation (``<source>.checkpoints.internal``).

    ``topic`` is the destination-side topic name, as MM2 writes it.
    """

    VALUE_LAYOUTS: ClassVar[Mapping[int, Layout]] = {0: CHECKPOINT_VALUE_V0}

    consumer_group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def __post_init__(self) -> None:
        self.key_bytes()
        self.value_bytes()

    def key_bytes(self) -> bytes:
        return CHECKPOINT_KEY.encode({"group": self.consumer_group, "topic": self.topic, "partition": self.partition})

    def value_bytes(self) -> bytes:
        return _encode_versioned(
            CHECKPOINT_VALUE_V0,
            {
                "upstreamOffset": self.upstream_offset,
                "offset": self.downstream_offset,
                "metadata": self.metadata,
            },
        )

    @classmethod
    def from_record(cls, key: RecordBytes, value: RecordBytes) -> Checkpoint:
        k = CHECKPOINT_KEY.decode(key)
        v = _decode_versioned("Checkpoint value", cls.VALUE_LAYOUTS, value)
        return cls(k["group"], k["topic"], k["partition"], v["upstreamOffset"], v["offset"], v["metadata"])


@dataclass(frozen=True)
class Heartbeat:
    """Liveness record MM2 emits per source->target flow (topic ``heartbeats``)."""

    VALUE_LAYOUTS: ClassVar[Mapping[int, Layout]] = {0: HEARTBEAT_VALUE_V0}

    source_alias: str
    target_alias: str
    timestamp_ms: int

    def __post_init__(self) -> None:
        self.key_bytes()
        self.value_bytes()

    def key_bytes(self) -> bytes:
        return HEARTBEAT_KEY.encode({"sourceClusterAlias": self.source_alias, "targetClusterAlias": self.target_alias})

    def value_bytes(self) -> bytes:
        return _encode_versioned(HEARTBEAT_VALUE_V0, {"timestamp": self.timestamp_ms})

    @classmethod
    def from_record(cls, key: RecordBytes, value: RecordBytes) -> Heartbeat:
        k = HEARTBEAT_KEY.decode(key)
        v = _decode_versioned("Heartbeat value", cls.VALUE_LAYOUTS, value)
        return cls(k["sourceClusterAlias"], k["targetClusterAlias"], v["timestamp"])


HEARTBEATS_TOPIC = "heartbeats"  # MM2's default (`heartbeats.topic`), on the target cluster


def remote_heartbeats_topic(source_alias: str) -> str:
    """The source's heartbeats topic as MM2 (DefaultReplicationPolicy) mirrors it onto the target.

    MM2's tooling finds upstream clusters by these names (`RemoteClusterUtils.upstreamClusters`,
    `replicationHops`), not by record contents.
    """
    return f"{_alias(source_alias)}.{HEARTBEATS_TOPIC}"


def offset_syncs_topic(target_alias: str) -> str:
    """MM2's offset-syncs topic; named after the target alias wherever it lives."""
    return f"mm2-offset-syncs.{_alias(target_alias)}.internal"


def checkpoints_topic(source_alias: str) -> str:
    """MM2's checkpoints topic on the destination cluster, named after the source alias."""
    return f"{_alias(source_alias)}.checkpoints.internal"


def _alias(alias: str) -> str:
    if not isinstance(alias, str) or not alias:
        raise ValueError(f"cluster alias must be a non-empty str, got {alias!r}")
    return alias
