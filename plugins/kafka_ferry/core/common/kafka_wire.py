"""Kafka's protocol primitives, written once: the types its generated messages are made of and :class:`Struct`, a
message declared field by field.

Why: kafka-ferry reads and writes three families of Kafka's generated-message formats (MM2's internal topics in
``core.offsets.mm2_wire``, the coordinator's ``__transaction_state`` in ``core.units.transaction_log``, and the
requests the client lacks in ``core.offsets.offset_fetch_wire``). Each declares its messages from these types, as
Kafka's JSON message specs (``clients/src/main/resources/common/message/*.json``) declare them, so one varint, one
compact string and one tagged-field section serve all three.

The encodings (Kafka's ``Type`` and ``ByteUtils``): big-endian INT8..INT64; STRING/BYTES with an INT16/INT32 length
(-1 = null where nullable); COMPACT_STRING/COMPACT_BYTES with an UNSIGNED_VARINT length + 1 (0 = null); ARRAY with
an INT32 count or, compact, UNSIGNED_VARINT count + 1; a flexible struct ends with a tagged-field section (tag count,
then tag, size, value each), unknown tags skipped by their size as Kafka's readers do.

Every type has ``encode(where, value) -> bytes`` and ``decode(where, data, pos) -> (value, next pos)``; ``where``
names the message and field, so every :class:`WireFormatError` says which field, which value or which byte.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka_ferry.core.common.failures import Retryable

STRING_MAX_BYTES = 32767  # Kafka's generated writers refuse a longer string (0x7fff), compact or not


class WireFormatError(Retryable, ValueError):
    """A record cannot be encoded or decoded; the message names the layout, field and value (or byte)."""


class WireType(Protocol):
    """What a field's type does: its name (in messages), its bytes, its value back."""

    @property
    def name(self) -> str: ...

    def encode(self, where: str, value: Any) -> bytes: ...

    def decode(self, where: str, data: bytes, pos: int) -> tuple[Any, int]: ...


def _take(where: str, name: str, data: bytes, pos: int, size: int) -> tuple[bytes, int]:
    end = pos + size
    if end > len(data):
        raise WireFormatError(f"{where} ({name}) truncated: length {size} at byte {pos}, only {len(data) - pos} left")
    return data[pos:end], end


def _utf8_bytes(where: str, name: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise WireFormatError(f"{where} ({name}) must be a str, got {value!r}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WireFormatError(f"{where} ({name}) value {value!r} is not valid UTF-8: {exc}") from exc
    if len(raw) > STRING_MAX_BYTES:
        raise WireFormatError(
            f"{where} ({name}) is {len(raw)} UTF-8 bytes, max {STRING_MAX_BYTES} (value starts {value[:40]!r})")
    return raw


def _text(where: str, name: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireFormatError(f"{where} ({name}) is not valid UTF-8: {exc}") from exc


@dataclass(frozen=True)
class _IntType:
    name: str
    packer: struct.Struct

    @property
    def bounds(self) -> tuple[int, int]:
        bits = self.packer.size * 8
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def encode(self, where: str, value: Any) -> bytes:
        if not isinstance(value, int) or isinstance(value, bool):
            raise WireFormatError(f"{where} ({self.name}) must be an int, got {value!r}")
        low, high = self.bounds
        if not low <= value <= high:
            raise WireFormatError(f"{where} ({self.name}) value {value} out of range [{low}, {high}]")
        return self.packer.pack(value)

    def decode(self, where: str, data: bytes, pos: int) -> tuple[int, int]:
        end = pos + self.packer.size
        if end > len(data):
            raise WireFormatError(
                f"{where} ({self.name}) truncated: needs {self.packer.size} bytes at byte {pos}, "
                f"only {len(data) - pos} left"
            )
        return int(self.packer.unpack_from(data, pos)[0]), end


INT8 = _IntType("INT8", struct.Struct(">b"))
INT16 = _IntType("INT16", struct.Struct(">h"))
INT32 = _IntType("INT32", struct.Struct(">i"))
INT64 = _IntType("INT64", struct.Struct(">q"))


class _Boolean:
    """One byte: 1 true, 0 false; any other byte reads as true, as Kafka reads it."""

    name = "BOOLEAN"

    def encode(self, where: str, value: Any) -> bytes:
        if not isinstance(value, bool):
            raise WireFormatError(f"{where} ({self.name}) must be a bool, got {value!r}")
        return b"\x01" if value else b"\x00"

    def decode(self, where: str, data: bytes, pos: int) -> tuple[bool, int]:
        raw, pos = _take(where, self.name, data, pos, 1)
        return raw != b"\x00", pos


BOOLEAN = _Boolean()


class _UnsignedVarint:
    name = "UNSIGNED_VARINT"
    MAX_BYTES = 5  # a 32-bit value

    def encode(self, where: str, value: Any) -> bytes:
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


UNSIGNED_VARINT = UVARINT = _UnsignedVarint()


@dataclass(frozen=True)
class _Sized:
    """A length-prefixed value: INT16 (strings) or INT32 (bytes) length, or, compact, UNSIGNED_VARINT length + 1.
    Null is -1 (compact: 0); where not ``nullable`` a null is an error. ``text``: UTF-8 str, else raw bytes."""

    name: str
    text: bool
    compact: bool = False
    nullable: bool = False

    def _length_bytes(self, where: str, length: int) -> bytes:
        if self.compact:
            return UVARINT.encode(where, length + 1)
        return (INT16 if self.text else INT32).packer.pack(length)

    def encode(self, where: str, value: Any) -> bytes:
        if value is None:
            if not self.nullable:
                raise WireFormatError(f"{where} ({self.name}) is not nullable")
            return self._length_bytes(where, -1)
        if self.text:
            raw = _utf8_bytes(where, self.name, value)
        elif isinstance(value, bytes | bytearray | memoryview):
            raw = bytes(value)
        else:
            raise WireFormatError(f"{where} ({self.name}) must be bytes, got {type(value).__name__}")
        return self._length_bytes(where, len(raw)) + raw

    def decode(self, where: str, data: bytes, pos: int) -> tuple[Any, int]:
        if self.compact:
            length, pos = UVARINT.decode(f"{where} length", data, pos)
            length -= 1
        else:
            length, pos = (INT16 if self.text else INT32).decode(f"{where} length", data, pos)
        if length < 0:
            if self.nullable:
                return None, pos
            kind = "strings" if self.text else "bytes"
            raise WireFormatError(f"{where} ({self.name}) has length {length}; null {kind} are not allowed")
        raw, pos = _take(where, self.name, data, pos, length)
        return (_text(where, self.name, raw) if self.text else raw), pos


STRING = _Sized("STRING", text=True)
NULLABLE_STRING = _Sized("NULLABLE_STRING", text=True, nullable=True)
COMPACT_STRING = _Sized("COMPACT_STRING", text=True, compact=True)
COMPACT_NULLABLE_STRING = _Sized("COMPACT_NULLABLE_STRING", text=True, compact=True, nullable=True)
BYTES = _Sized("BYTES", text=False)
COMPACT_NULLABLE_BYTES = _Sized("COMPACT_NULLABLE_BYTES", text=False, compact=True, nullable=True)


@dataclass(frozen=True)
class Array:
    """An array of ``item``: INT32 count (-1 null) or, compact, UNSIGNED_VARINT count + 1 (0 null)."""

    item: WireType
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
            if count == -1:
                raise WireFormatError(f"{where} ({self.name}) is a null array at byte {pos}; it may not be")
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
    type: WireType


@dataclass(frozen=True)
class Struct:
    """Named fields back to back; ``flexible`` adds a tagged-field section (``tagged``: tag -> field, with the
    default a missing tag means) after them. ``where`` (the message, or the array item this struct is) prefixes
    each field's name in errors."""

    name: str
    fields: tuple[Field, ...]
    flexible: bool = False
    tagged: Mapping[int, tuple[Field, Any]] = field(default_factory=dict)

    def encode(self, where: str, value: Mapping[str, Any]) -> bytes:
        parts = []
        for f in self.fields:
            if f.name not in value:
                raise WireFormatError(f"{where}: missing field {f.name!r}")
            parts.append(f.type.encode(f"{where} field {f.name!r}", value[f.name]))
        if self.flexible:
            tags = [(tag, f, default) for tag, (f, default) in sorted(self.tagged.items())
                    if value.get(f.name, default) != default]
            parts.append(UVARINT.encode(where, len(tags)))
            for tag, f, _ in tags:
                raw = f.type.encode(f"{where} tag {tag} {f.name!r}", value[f.name])
                parts += [UVARINT.encode(where, tag), UVARINT.encode(where, len(raw)), raw]
        return b"".join(parts)

    def decode(self, where: str, data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        for f in self.fields:
            out[f.name], pos = f.type.decode(f"{where} field {f.name!r}", data, pos)
        if self.flexible:
            out.update({f.name: default for f, default in self.tagged.values()})
            count, pos = UVARINT.decode(f"{where} tag count", data, pos)
            last = -1
            for _ in range(count):
                tag, pos = UVARINT.decode(f"{where} tag", data, pos)
                size, pos = UVARINT.decode(f"{where} tag {tag} size", data, pos)
                if tag <= last:
                    raise WireFormatError(f"{where}: tag {tag} after tag {last} at byte {pos} (not ascending)")
                last = tag
                end = pos + size
                if end > len(data):
                    raise WireFormatError(f"{where} tag {tag} truncated: {size} bytes at byte {pos}, "
                                          f"only {len(data) - pos} left")
                if tag in self.tagged:
                    f = self.tagged[tag][0]
                    out[f.name], used = f.type.decode(f"{where} tag {tag} {f.name!r}", data, pos)
                    if used != end:
                        raise WireFormatError(f"{where} tag {tag} {f.name!r}: size {size} but the value took "
                                              f"{used - pos} bytes")
                pos = end  # an unknown tag is skipped by its size
        return out, pos


def as_bytes(what: str, data: Any) -> bytes:
    """``data`` as bytes, or the error a record's missing or mistyped key/value is."""
    if data is None:
        raise WireFormatError(f"{what} is None (a tombstone?), expected bytes")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise WireFormatError(f"{what} must be bytes, got {type(data).__name__}")
    return bytes(data)


def reject_trailing(what: str, data: bytes, pos: int) -> None:
    """Decoding is stricter than Kafka's readers: bytes after the last field mean a shape this code does not know."""
    if pos != len(data):
        raise WireFormatError(f"{what}: {len(data) - pos} trailing bytes after byte {pos} of {len(data)}")
