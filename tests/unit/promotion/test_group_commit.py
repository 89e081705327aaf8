"""promotion.commit end to end on the in-memory cluster of ``tests/fakes`` (whose groups answer as the brokers'
do, ``test_fakes_contract.py``): what lands in each destination group, what a second run does, and a group with a
live member refused while the others commit."""

from __future__ import annotations

import pytest
from fakes.cluster import FakeCluster

from kafka_ferry.core.offsets.offset_decisions import OffsetDecision
from kafka_ferry.promotion.commit import GroupCommitRefused, commit_translated_offsets


def decision(group: str, partition: int, downstream: int | None, metadata: str = "") -> OffsetDecision:
    return OffsetDecision(group, "src", partition, "dst", 40 + partition, downstream, "exact", "test",
                          metadata=metadata)


@pytest.fixture
def destination() -> FakeCluster:
    cluster = FakeCluster("destination")
    cluster.create_topic("dst", 3, 1, {})
    return cluster


def test_translated_offsets_are_committed_with_their_metadata_and_a_second_run_commits_nothing(destination):
    decisions = [decision("a", 0, 5, "m0"), decision("a", 1, 7), decision("b", 2, 3), decision("c", 0, None)]
    first = {o.group: o.as_dict() for o in commit_translated_offsets(destination, decisions)}
    assert set(first) == {"a", "b"}  # a decision without a destination offset commits nothing (c)
    assert first["a"]["committed"] == {"dst:0": 5, "dst:1": 7} and first["b"]["committed"] == {"dst:2": 3}
    assert destination.groups_offsets_with_metadata(["a", "b", "c"]) == {
        "a": {("dst", 0): (5, "m0"), ("dst", 1): (7, "")}, "b": {("dst", 2): (3, "")}, "c": {}}
    commits = destination.calls["alter_group_offsets"]
    again = commit_translated_offsets(destination, decisions)
    assert [(o.group, o.committed, sorted(o.skipped.values())) for o in again] == [
        ("a", {}, ["already at 5", "already at 7"]), ("b", {}, ["already at 3"])]
    assert destination.calls["alter_group_offsets"] == commits  # nothing sent: idempotent


def test_a_destination_group_ahead_is_kept_unless_a_rewind_is_allowed(destination):
    destination.alter_group_offsets("a", {("dst", 0): 9})  # its consumers moved on after a first promotion
    kept = commit_translated_offsets(destination, [decision("a", 0, 5)])
    assert kept[0].skipped == {"dst:0": "destination at 9 is ahead of 5: not rewinding"}
    assert destination.group_offsets("a") == {("dst", 0): 9}
    commit_translated_offsets(destination, [decision("a", 0, 5)], allow_rewind=True)
    assert destination.group_offsets("a") == {("dst", 0): 5}


def test_a_group_with_a_live_member_is_refused_the_others_commit_and_strict_raises_naming_it(destination):
    destination.join("busy")
    outcomes = {o.group: o for o in commit_translated_offsets(destination, [decision("busy", 0, 5),
                                                                            decision("free", 0, 6)])}
    assert outcomes["busy"].refused == "1 member(s), state STABLE: commit only while the group is empty"
    assert outcomes["free"].committed == {"dst:0": 6} and destination.group_offsets("busy") == {}
    with pytest.raises(GroupCommitRefused, match="group busy: 1 member"):
        commit_translated_offsets(destination, [decision("busy", 0, 5)], strict=True)


def test_a_broker_refusal_after_the_members_were_read_is_reported_per_group(destination):
    """A member joining between the read and the commit: the broker refuses that group's commit (UNKNOWN_MEMBER_ID),
    the outcome names it and commits nothing for it; the others are committed."""

    class JoinsAfterTheRead(FakeCluster):
        def groups_offsets(self, group_ids):
            offsets = super().groups_offsets(group_ids)
            self.join("late")  # after describe_groups: the commit is the first call to see the member
            return offsets

    cluster = JoinsAfterTheRead("destination")
    cluster.create_topic("dst", 1, 1, {})
    outcomes = {o.group: o for o in commit_translated_offsets(cluster, [decision("late", 0, 5),
                                                                        decision("other", 0, 6)])}
    refused = outcomes["late"].refused
    assert refused is not None and refused.startswith("broker refused:") and outcomes["late"].committed == {}
    assert outcomes["other"].refused is None and cluster.group_offsets("other") == {("dst", 0): 6}
