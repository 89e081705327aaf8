"""A promotion's destination groups ahead of the final translation: decided from the offsets alone, refused at once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.failures import retry_cannot_help
from kafka_ferry.core.groups_ahead import DestinationGroupsAhead, GroupAhead, groups_ahead, refuse_groups_ahead


def test_only_a_partition_committed_past_the_translation_is_ahead():
    expected = {"billing": {("orders", 0): 100, ("orders", 1): 50}, "audit": {("orders", 0): 100}}
    committed = {"billing": {("orders", 0): 140, ("orders", 1): 20},  # 0 moved on, 1 behind (the commit moves it)
                 "audit": {("orders", 0): 100}}  # synced
    assert groups_ahead(expected, committed) == [GroupAhead("billing", "orders", 0, 140, 100)]
    assert groups_ahead(expected, {}) == []  # nothing committed yet: the commit will do it, nothing to refuse


def test_the_refusal_is_permanent_and_names_the_way_out():
    with pytest.raises(DestinationGroupsAhead) as caught:
        refuse_groups_ahead("payments", {"billing": {("orders", 0): 100}}, {"billing": {("orders", 0): 140}})
    message = str(caught.value)
    assert retry_cannot_help(caught.value)  # fails in one try, never waits out a sensor timeout
    assert "group billing orders-0 committed at 140, translation 100" in message
    assert "allow_rewind" in message and "kafka-ferry promote --allow-rewind" in message
    assert "reset-promotion" not in message  # never advises a step that drops the way back
    refuse_groups_ahead("payments", {"billing": {("orders", 0): 100}}, {"billing": {("orders", 0): 99}})


offsets = st.dictionaries(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3)), st.integers(0, 1000),
                          max_size=6)


@given(st.dictionaries(st.sampled_from(["g1", "g2", "g3"]), offsets, max_size=3),
       st.dictionaries(st.sampled_from(["g1", "g2", "g3"]), offsets, max_size=3))
def test_ahead_is_exactly_the_partitions_committed_past_their_translation(expected, committed):
    found = {(a.group, a.destination_topic, a.partition) for a in groups_ahead(expected, committed)}
    want = {(g, t, p) for g, parts in expected.items() for (t, p), o in parts.items()
            if (committed.get(g) or {}).get((t, p), -1) > o}
    assert found == want
