"""A group the client cannot describe (a KIP-1071 streams group) is never taken for empty
(core.common.cluster_model)."""

from __future__ import annotations

from kafka_ferry.core.common.cluster_model import UNDESCRIBED_STATE, GroupInfo
from kafka_ferry.core.cutover.staged_cutover import group_readiness
from kafka_ferry.core.provisioning.provisioning_plan import plan_groups
from kafka_ferry.core.specs.spec import parse_spec


def test_an_undescribed_group_counts_as_live_everywhere():
    unseen, empty = GroupInfo("wc", UNDESCRIBED_STATE, 0), GroupInfo("g", "EMPTY", 0)
    assert unseen.is_active and not unseen.described and not empty.is_active and empty.described
    assert unseen.describe().startswith("state UNDESCRIBED (committed offsets, yet described as Dead with no member")
    assert empty.describe() == "0 member(s), state EMPTY"
    spec = parse_spec({"name": "m", "tenant": "t", "source": {"connection_id": "a", "alias": "a"},
                       "destination": {"connection_id": "b", "alias": "b"}, "topics": {"include": [".*"]}})
    plan = plan_groups(spec, {"wc": {"t"}}, {"t"}, {"wc": unseen})
    assert plan.refusals == ("group wc: is state UNDESCRIBED (committed offsets, yet described as Dead with no "
                             "member: a group of a type this client cannot describe (a KIP-1071 streams group?), "
                             "counted as live) on the destination; stop those consumers before migrating its "
                             "offsets",)
    # promotion readiness leaves an undescribed group out of the members it knows: "not described", never ready
    (ready,) = group_readiness(["wc"], {}, {"wc": None}, [], now_ms=10_000, quiet_ms=1)
    assert not ready.ready and ready.reason == "not described on the source"
