"""A promotion's destination groups ahead of the final translation: decided from the offsets alone, refused at once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.core.offsets.groups_ahead import (
    SETTLED_METHODS,
    DestinationGroupsAhead,
    GroupAhead,
    groups_ahead,
    refuse_groups_ahead,
    settled_translation,
)
from kafka_ferry.core.offsets.offset_decisions import PartitionCopy, decide
from kafka_ferry.core.offsets.offset_sync_policy import SyncPoint
from kafka_ferry.core.offsets.offset_translation import TranslationMethod


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


# --- the pre-flight's part: translations no final copy can change ---------------------------------------------------
def a_copy(placed: list[tuple[int, int]], copied_end: int) -> PartitionCopy:
    """A partition copied record by record: (source offset, destination offset) of each copied record, all synced."""
    return PartitionCopy("orders", 0, "orders", copied_end, tuple(SyncPoint(u, d) for u, d in placed))


@st.composite
def copies_and_more(draw):
    """A copy so far, and the same copy after a final copy appended more records (after a gap on the destination:
    records produced there, markers)."""
    ups = sorted(draw(st.sets(st.integers(0, 40), min_size=0, max_size=15)))
    cut = draw(st.integers(0, len(ups)))
    down, placed = 0, []
    for u in ups:
        down += draw(st.integers(0, 2))  # a transaction marker, a record produced on the destination
        placed.append((u, down))
        down += 1
    copied_end = draw(st.integers(placed[cut - 1][0] + 1 if cut else 0, ups[cut] if cut < len(ups) else 45))
    final_end = draw(st.integers(max(copied_end, ups[-1] + 1 if ups else 0), 50))
    return a_copy(placed[:cut], copied_end), a_copy(placed, final_end)


@given(copies_and_more(), st.integers(0, 52))
def test_a_settled_translation_is_what_the_final_copy_translates_too(copies, committed):
    now, final = copies
    before = decide("billing", committed, "", now)
    after = decide("billing", committed, "", final)
    if before.method in SETTLED_METHODS:
        assert after.downstream_offset == before.downstream_offset, (before.describe(), after.describe())
    expected = settled_translation([before])
    assert expected == ({"billing": {("orders", 0): before.downstream_offset}}
                        if before.method in SETTLED_METHODS else {})


def test_a_group_with_members_on_the_source_is_left_to_the_commit_step():
    decisions = [decide(g, 3, "", a_copy([(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)], 5)) for g in ("billing", "audit")]
    assert {d.method for d in decisions} == {TranslationMethod.EXACT_RUN}
    assert settled_translation(decisions, active=["billing"]) == {"audit": {("orders", 0): 3}}
    ahead = decide("late", 9, "", a_copy([(0, 0), (1, 1)], 2))  # committed past the copy: it may still move
    assert ahead.method == TranslationMethod.AHEAD_OF_COPY and settled_translation([ahead]) == {}


def test_the_staged_refusal_names_its_own_mode():
    with pytest.raises(DestinationGroupsAhead) as caught:
        refuse_groups_ahead("payments", {"billing": {("orders", 0): 100}}, {"billing": {("orders", 0): 140}},
                            mode="promote-groups")
    assert "trigger mode 'promote-groups' again" in str(caught.value)
    assert "kafka-ferry promote-groups --allow-rewind" in str(caught.value)
