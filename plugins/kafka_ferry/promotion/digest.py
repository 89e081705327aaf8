"""An order-sensitive digest of a partition's records, comparable across clusters (pure).

Why these fields: a consumer sees key, value, its own headers and the timestamp, in order. Provenance
headers are added by the copy and offsets differ by design, so both are left out. Each field is
length-prefixed (-1 for null) so no two record sequences encode to the same bytes.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

from kafka_ferry.core.offsets.provenance import user_headers

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _field(data: bytes | str | None) -> bytes:
    if data is None:
        return _I32.pack(-1)
    raw = data.encode() if isinstance(data, str) else bytes(data)
    return _I32.pack(len(raw)) + raw


def encode_record(key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]] | None,
                  timestamp_ms: int | None) -> bytes:
    own = user_headers(headers)
    parts = [b"R", _field(key), _field(value), _I32.pack(len(own))]
    parts += [_field(name) + _field(v) for name, v in own]
    parts.append(_I64.pack(-1 if timestamp_ms is None else timestamp_ms))
    return b"".join(parts)


class PartitionDigest:
    """Count and running sha256 of records fed in offset order."""

    def __init__(self) -> None:
        self.count = 0
        self._sha = hashlib.sha256()

    def add(self, key, value, headers, timestamp_ms) -> None:
        self.count += 1
        self._sha.update(encode_record(key, value, headers, timestamp_ms))

    @property
    def hexdigest(self) -> str:
        return self._sha.hexdigest()
