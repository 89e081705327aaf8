"""The rollback's reverse schema id map: its invariants over arbitrary forward maps, the literal bytes the copy-back
writes, and the records it refuses (ids the forward map never knew)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.schemas.schema_id_reversal import UnmappedRecord, find_unmapped, reverse_id_map
from kafka_ferry.core.schemas.schema_wire import SchemaIdRewriter, UnknownSchemaId
from kafka_ferry.core.schemas.serialized_fields import FieldDecision, FieldsUndecided

ids = st.integers(min_value=0, max_value=2**31 - 1)
forward_maps = st.dictionaries(ids, ids, max_size=40)


@given(forward_maps)
def test_reverse_map_is_injective_and_round_trips_through_the_forward_map(forward):
    reverse = reverse_id_map(forward)
    assert set(reverse.to_source) == set(forward.values())  # every destination id the forward copy wrote
    assert len(set(reverse.to_source.values())) == len(reverse.to_source)  # injective
    for destination_id, source_id in reverse.to_source.items():
        assert forward[source_id] == destination_id  # a record copied back and forward again keeps its id


@given(forward_maps)
def test_shared_destination_ids_go_back_to_the_lowest_source_id_and_are_reported(forward):
    reverse = reverse_id_map(forward)
    for destination_id in reverse.to_source:
        sources = sorted(s for s, d in forward.items() if d == destination_id)
        assert reverse.to_source[destination_id] == sources[0]
        assert reverse.shared.get(destination_id, (sources[0],)) == tuple(sources)


@given(forward_maps, st.lists(ids, max_size=20))
def test_unknown_ids_are_exactly_those_outside_the_forward_image(forward, seen):
    reverse = reverse_id_map(forward)
    assert reverse.unknown(seen) == sorted({i for i in seen if i not in set(forward.values())})


def test_two_source_ids_on_one_destination_id():
    reverse = reverse_id_map({7: 100, 3: 100, 5: 101})
    assert reverse.to_source == {100: 3, 101: 5}
    assert reverse.shared == {100: (3, 7)}
    assert reverse.as_dict() == {"destination_to_source": {"100": 3, "101": 5}, "shared": {"100": [3, 7]}}


def test_copy_back_rewrites_exactly_the_four_id_bytes_back_to_the_source_id():
    rewrite = reverse_id_map({258: 100001}).rewriter().rewrite
    # Avro: magic, destination id 100001 (0x000186a1), Avro string "a" -> source id 258 (0x102)
    assert rewrite(bytes.fromhex("00 000186a1 02 61")) == bytes.fromhex("00 00000102 02 61")
    # Protobuf: message indexes [1, 0] and the payload stay as they are
    assert rewrite(bytes.fromhex("00 000186a1 04 02 00 08 96 01")) == bytes.fromhex("00 00000102 04 02 00 08 96 01")
    # not the wire format (no magic byte, too short, null): untouched
    for payload in (None, b"", b"\x00\x00\x01", b"\x01\x00\x01\x86\xa1\x02"):
        assert rewrite(payload) is payload


def test_copy_back_never_passes_an_unknown_id_through_whatever_the_forward_policy():
    with pytest.raises(UnknownSchemaId) as info:
        reverse_id_map({258: 100001}).rewriter().rewrite(bytes.fromhex("00 000186a2 02 61"))
    assert info.value.schema_id == 100002


VALUE_ONLY = {"t": FieldDecision("t", key=False, value=True, reason="subject t-value")}


def test_find_unmapped_names_record_field_and_id_and_looks_only_at_serialized_fields():
    reverse = reverse_id_map({258: 100001})
    known = bytes.fromhex("00 000186a1 02 61")
    unknown = bytes.fromhex("00 000186a2 02 61")
    long_key = bytes.fromhex("00 000186a2 0000 0001")  # an 8-byte long key whose bytes 1-4 look like an id: data
    records = [("t", 0, 10, long_key, known), ("t", 0, 11, None, unknown), ("t", 1, 4, unknown, None)]
    assert find_unmapped(records, VALUE_ONLY, reverse) == [UnmappedRecord("t", 0, 11, "value", 100002)]
    both = {"t": FieldDecision("t", key=True, value=True, reason="spec")}
    found = find_unmapped(records, both, reverse)
    assert [(r.offset, r.field, r.schema_id) for r in found] == [(10, "key", 100002), (11, "value", 100002),
                                                                 (4, "key", 100002)]
    assert found[0].describe() == ("t-0 at offset 10: the key carries destination schema id 100002, which the "
                                   "forward schema migration never mapped")


def test_find_unmapped_refuses_a_topic_without_a_decision_rather_than_guessing():
    with pytest.raises(FieldsUndecided, match="'other'"):
        find_unmapped([("other", 0, 0, None, b"\x00\x00\x00\x00\x01")], VALUE_ONLY, reverse_id_map({}))


@given(forward_maps.filter(bool), st.data())
def test_bytes_copied_back_and_forward_again_are_the_destination_bytes(forward, data):
    """A destination payload carrying a mapped id: back to the source id, and the forward rewrite of that gives the
    destination payload byte for byte (only bytes 1-4 ever change)."""
    reverse = reverse_id_map(forward)
    destination_id = data.draw(st.sampled_from(sorted(reverse.to_source)))
    body = data.draw(st.binary(max_size=30))
    payload = b"\x00" + destination_id.to_bytes(4, "big") + body
    back = reverse.rewriter().rewrite(payload)
    assert back is not None
    assert back[5:] == body and back[0] == 0 and int.from_bytes(back[1:5], "big") == reverse.to_source[destination_id]
    assert SchemaIdRewriter(forward).rewrite(back) == payload
    assert find_unmapped([("t", 0, 0, None, payload)], VALUE_ONLY, reverse) == []
