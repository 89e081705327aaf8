"""Provenance headers carried by every copied record, and the loop guard built on them.

Like Pulsar's original-position metadata and RocketMQ's source property: each copied record says which
cluster and which source offset it came from. That makes resume exactly-once (the destination's tail
says what was already copied) and stops records from being copied back to where they came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

SOURCE_CLUSTER_HEADER = "kferry.src.cluster"
SOURCE_OFFSET_HEADER = "kferry.src.offset"
PROVENANCE_HEADERS = frozenset({SOURCE_CLUSTER_HEADER, SOURCE_OFFSET_HEADER})

Headers = Sequence[tuple[str, bytes | None]]


def provenance_headers(source_cluster_id: str, source_offset: int) -> list[tuple[str, bytes]]:
    return [(SOURCE_CLUSTER_HEADER, source_cluster_id.encode()), (SOURCE_OFFSET_HEADER, str(source_offset).encode())]


def read_provenance(headers: Iterable[tuple[str, bytes | None]] | None) -> tuple[str | None, int | None]:
    """(source cluster id, source offset) of a copied record; the last header of each name wins."""
    cluster, offset = None, None
    for name, value in headers or ():
        if name == SOURCE_CLUSTER_HEADER and value is not None:
            cluster = value.decode(errors="replace")
        elif name == SOURCE_OFFSET_HEADER and value is not None:
            offset = int(value)
    return cluster, offset


def user_headers(headers: Iterable[tuple[str, bytes | None]] | None) -> list[tuple[str, bytes | None]]:
    """The record's own headers, without provenance a previous hop may have added."""
    return [(k, v) for k, v in (headers or ()) if k not in PROVENANCE_HEADERS]


def is_loop(headers: Iterable[tuple[str, bytes | None]] | None, destination_cluster_id: str) -> bool:
    """True when a record was itself copied from the destination: copying it back would loop."""
    cluster, _ = read_provenance(headers)
    return cluster == destination_cluster_id
