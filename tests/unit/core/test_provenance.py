"""The loop guard and provenance stamping of one record (``core.offsets.provenance.copy_headers``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.offsets.provenance import (
    PROVENANCE_HEADERS,
    SOURCE_CLUSTER_HEADER,
    SOURCE_OFFSET_HEADER,
    copy_headers,
    read_provenance,
)

SOURCE, DESTINATION = "src-cluster", "dst-cluster"
STAMP = (SOURCE_CLUSTER_HEADER, SOURCE.encode())

user_header = st.tuples(st.text(min_size=1, max_size=8).filter(lambda n: n not in PROVENANCE_HEADERS),
                        st.one_of(st.none(), st.binary(max_size=8)))
user_headers = st.lists(user_header, max_size=5)
other_cluster = st.text(min_size=1, max_size=8).filter(lambda c: c != DESTINATION)
offsets = st.integers(min_value=0, max_value=2**62)


@given(user_headers, offsets)
def test_a_stamped_record_keeps_its_own_headers_in_order_then_names_this_hop(headers, offset):
    copy, out = copy_headers(list(headers) or None, offset, DESTINATION, STAMP)
    assert copy and out is not None
    assert out[:-2] == headers  # the record's own headers, in their order, values untouched
    assert out[-2:] == [STAMP, (SOURCE_OFFSET_HEADER, str(offset).encode())]
    assert read_provenance(out) == (SOURCE, offset)


@given(user_headers, other_cluster, offsets, offsets)
def test_an_earlier_hops_stamp_is_replaced_not_kept(headers, earlier_cluster, earlier_offset, offset):
    earlier = [(SOURCE_CLUSTER_HEADER, earlier_cluster.encode()), (SOURCE_OFFSET_HEADER, b"%d" % earlier_offset)]
    copy, out = copy_headers(headers[:1] + earlier + headers[1:], offset, DESTINATION, STAMP)
    assert copy and out is not None and out[:-2] == headers
    assert [h for h in out if h[0] in PROVENANCE_HEADERS] == [STAMP, (SOURCE_OFFSET_HEADER, b"%d" % offset)]


@given(user_headers, offsets, st.booleans())
def test_a_record_copied_from_the_destination_is_never_copied_back(headers, offset, stamping):
    looped = [*headers, (SOURCE_CLUSTER_HEADER, DESTINATION.encode()), (SOURCE_OFFSET_HEADER, b"7")]
    assert copy_headers(looped, offset, DESTINATION, STAMP if stamping else None) == (False, None)


@given(st.one_of(st.none(), user_headers), other_cluster, offsets)
def test_without_stamping_the_headers_go_as_they_are(headers, earlier_cluster, offset):
    assert copy_headers(headers, offset, DESTINATION, None) == (True, headers)
    earlier = [*(headers or []), (SOURCE_CLUSTER_HEADER, earlier_cluster.encode())]
    assert copy_headers(list(earlier), offset, DESTINATION, None) == (True, earlier)  # at-least-once keeps it


def test_a_record_without_headers_gets_only_the_stamp():
    assert copy_headers(None, 42, DESTINATION, STAMP) == (True, [STAMP, (SOURCE_OFFSET_HEADER, b"42")])
    assert copy_headers([], 0, DESTINATION, STAMP) == (True, [STAMP, (SOURCE_OFFSET_HEADER, b"0")])


def test_a_stamp_whose_cluster_header_has_no_value_is_not_a_loop():
    headers = [(SOURCE_CLUSTER_HEADER, None), ("k", b"v")]
    assert copy_headers(list(headers), 3, DESTINATION, STAMP) == (True, [("k", b"v"), STAMP,
                                                                        (SOURCE_OFFSET_HEADER, b"3")])
