"""The reconciliation digest: a pinned byte layout, order-sensitive, blind to provenance headers."""

from __future__ import annotations

from kafka_ferry.core.offsets.provenance import provenance_headers
from kafka_ferry.promotion.digest import PartitionDigest, encode_record


def test_byte_layout():
    assert encode_record(b"k", None, [("h", b"v")], 5) == (
        b"R" + b"\x00\x00\x00\x01k" + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x01h" + b"\x00\x00\x00\x01v" + b"\x00\x00\x00\x00\x00\x00\x00\x05")


def test_null_and_empty_differ_and_provenance_is_ignored():
    assert encode_record(None, b"", None, 1) != encode_record(b"", b"", None, 1)
    assert encode_record(b"k", b"v", [("h", b"1"), *provenance_headers("c", 7)], 1) == \
        encode_record(b"k", b"v", [("h", b"1")], 1)


def test_order_sensitive():
    a, b = PartitionDigest(), PartitionDigest()
    for d, order in ((a, (1, 2)), (b, (2, 1))):
        for i in order:
            d.add(b"k", str(i).encode(), None, i)
    assert a.count == b.count == 2 and a.hexdigest != b.hexdigest
