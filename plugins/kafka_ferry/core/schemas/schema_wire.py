"""The Confluent Schema Registry wire format, and the schema-id rewrite a remap migration applies to it.

Layout of a key or value produced by a Confluent serializer (Avro, Protobuf, JSON Schema):

    offset  size  field
    0       1     magic byte, always 0x00
    1       4     schema id, INT32 big-endian (the id the source registry assigned)
    5       …     Protobuf only: the message-index array (zig-zag varints), then the payload;
                  Avro / JSON Schema: the payload

Example: id 258 (0x102) in front of Avro bytes `02 61` is `00 00 00 01 02 02 61`.

The rewrite replaces bytes 1..4 and nothing else: Protobuf message indexes and the payload are kept as they
are, so a rewritten record differs from its source in exactly four bytes. A key or value without the magic
byte (or shorter than the header) is not in the wire format and passes untouched.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Literal

from kafka_ferry.core.common.failures import Retryable

MAGIC_BYTE = 0
HEADER = struct.Struct(">bI")  # magic byte, schema id
HEADER_SIZE = HEADER.size  # 5

UnknownIdPolicy = Literal["fail", "pass-through"]
UNKNOWN_ID_POLICIES: tuple[UnknownIdPolicy, ...] = ("fail", "pass-through")


class UnknownSchemaId(Retryable, KeyError):
    """A record carries a schema id the id map does not know (the caller adds topic, partition, offset)."""

    def __init__(self, schema_id: int):
        self.schema_id = schema_id
        super().__init__(schema_id)

    def __str__(self) -> str:
        return f"schema id {self.schema_id} is not in the source → destination id map"


def schema_id_of(payload: bytes | None) -> int | None:
    """The schema id of a wire-format payload, or None when the payload does not carry one."""
    if payload is None or len(payload) < HEADER_SIZE or payload[0] != MAGIC_BYTE:
        return None
    schema_id: int = HEADER.unpack_from(payload)[1]
    return schema_id


def with_schema_id(payload: bytes, schema_id: int) -> bytes:
    """The same wire-format payload carrying `schema_id`; bytes after the header are copied unchanged."""
    return HEADER.pack(MAGIC_BYTE, schema_id) + payload[HEADER_SIZE:]


class SchemaIdRewriter:
    """Rewrites source schema ids to destination ids in wire-format keys and values.

    `policy` decides what an id missing from the map does: `fail` raises UnknownSchemaId (the copy stops
    and names the record), `pass-through` leaves the payload as it is. Built once per task; `rewrite` is
    on the record path, so it does one length check, one byte compare and one dict lookup per payload.
    """

    def __init__(self, id_map: Mapping[int, int], policy: UnknownIdPolicy = "fail"):
        if policy not in UNKNOWN_ID_POLICIES:
            raise ValueError(f"unknown-id policy must be one of {UNKNOWN_ID_POLICIES}, not {policy!r}")
        self.id_map = dict(id_map)
        self.policy = policy
        # Ids that map onto themselves need no new bytes; keeping them out makes rewrite() a no-op for them.
        self._changes = {src: dst for src, dst in self.id_map.items() if src != dst}

    def rewrite(self, payload: bytes | None) -> bytes | None:
        if payload is None or len(payload) < HEADER_SIZE or payload[0] != MAGIC_BYTE:
            return payload
        source_id = HEADER.unpack_from(payload)[1]
        destination_id = self._changes.get(source_id)
        if destination_id is not None:
            return with_schema_id(payload, destination_id)
        if source_id not in self.id_map and self.policy == "fail":
            raise UnknownSchemaId(source_id)
        return payload

    def normalise(self, payload: bytes | None) -> bytes | None:
        """The payload as the destination should hold it, for digests: like rewrite, but never raises."""
        try:
            return self.rewrite(payload)
        except UnknownSchemaId:
            return payload
