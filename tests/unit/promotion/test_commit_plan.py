"""promotion.commit's per-group decision (what to commit, skip or refuse), now taken before any group is committed."""

from __future__ import annotations

from kafka_ferry.core.common.cluster_model import GroupInfo
from kafka_ferry.core.offsets.offset_decisions import OffsetDecision
from kafka_ferry.promotion.commit import _plan_group


def decision(partition: int, downstream: int, metadata: str = "") -> OffsetDecision:
    return OffsetDecision("g", "src", partition, "dst", downstream, downstream, "exact", "test", metadata=metadata)


def test_a_group_with_members_is_refused_and_nothing_is_planned():
    outcome, offsets, metadata = _plan_group("g", [decision(0, 5)], False, GroupInfo("g", "Stable", 2), {})
    assert outcome.refused == "2 member(s), state Stable: commit only while the group is empty"
    assert (offsets, metadata, outcome.committed) == ({}, {}, {})


def test_offsets_already_there_or_ahead_are_skipped_the_rest_planned_with_their_metadata():
    current = {("dst", 0): 5, ("dst", 1): 9}
    decisions = [decision(0, 5), decision(1, 7), decision(2, 3, "meta")]
    outcome, offsets, metadata = _plan_group("g", decisions, False, GroupInfo("g", "Empty", 0), current)
    assert outcome.skipped == {"dst:0": "already at 5", "dst:1": "destination at 9 is ahead of 7: not rewinding"}
    assert offsets == {("dst", 2): 3} and metadata == {("dst", 2): "meta"}
    assert outcome.committed == {"dst:2": 3} and outcome.refused is None


def test_a_rewind_is_planned_only_when_allowed_and_an_unknown_group_is_committed():
    outcome, offsets, _ = _plan_group("g", [decision(1, 7)], True, None, {("dst", 1): 9})
    assert offsets == {("dst", 1): 7} and outcome.committed == {"dst:1": 7} and not outcome.skipped
