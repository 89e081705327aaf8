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


Stamped = list[tuple[str, bytes | None]]


def copy_headers(headers: list[tuple[str, bytes | None]] | None, offset: int, destination_cluster_id: str,
                 cluster_header: tuple[str, bytes] | None) -> tuple[bool, Stamped | None]:
    """The loop guard and provenance stamping of one record: ``(copy it, the headers to produce it with)``.

    - a record whose provenance names the destination cluster was copied from there: not copied (loop guard);
    - stamping (``cluster_header`` given): an earlier hop's provenance is dropped, and this hop's
      ``(cluster_header, source offset)`` appended, after the record's own headers, in their order;
    - without stamping the headers go as they are (an earlier hop's stamp included: at-least-once keeps it).

    ``headers`` is the consumed record's own list: when stamping appends to it, it is extended in place (no copy
    per record on the hot path).
    """
    if headers:
        for name, _ in headers:
            if name in PROVENANCE_HEADERS:  # copied before: the loop guard, then drop the old stamp
                if is_loop(headers, destination_cluster_id):
                    return False, None
                if cluster_header is not None:
                    headers = user_headers(headers)
                break
    if cluster_header is None:
        return True, headers
    if headers:
        headers.append(cluster_header)
        headers.append((SOURCE_OFFSET_HEADER, b"%d" % offset))
        return True, headers
    return True, [cluster_header, (SOURCE_OFFSET_HEADER, b"%d" % offset)]
