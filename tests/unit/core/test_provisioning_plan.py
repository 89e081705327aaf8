"""Provisioning plans are decided before any change: creations, growth, config drift and refusals."""

from __future__ import annotations

import pytest

from kafka_ferry.core.common.cluster_model import GroupInfo, TopicInfo
from kafka_ferry.core.provisioning.provisioning_plan import ProvisioningRefused, plan_groups, plan_topics, select_topics
from kafka_ferry.core.provisioning.time_fidelity import AFTER_MAX_MS, BEFORE_MAX_MS, TIMESTAMP_TYPE, UNLIMITED
from kafka_ferry.core.specs.spec import parse_spec

SPEC = parse_spec({
    "name": "t", "tenant": "t",
    "source": {"connection_id": "s", "alias": "src"}, "destination": {"connection_id": "d", "alias": "dst"},
    "topics": {"include": ["orders.*", "pay"], "exclude": ["orders-tmp"]},
    "groups": {"include": ["g-.*"]},
})
CONFIGS = {"cleanup.policy": "delete", "retention.ms": "1000", "min.insync.replicas": "2", "segment.bytes": "1"}
# A mirror while copying: CreateTime (records keep the source's timestamps) and no timestamp limits.
LIFTED = {TIMESTAMP_TYPE: "CreateTime", BEFORE_MAX_MS: UNLIMITED, AFTER_MAX_MS: UNLIMITED}


def topic(name, partitions=3, rf=3, **configs):
    return TopicInfo(name, partitions, rf, {**CONFIGS, **configs})


def test_select_topics_skips_internal_and_excluded():
    assert select_topics(SPEC, ["orders", "orders-tmp", "orders-eu", "__consumer_offsets", "pay", "payx"]) == [
        "orders", "orders-eu", "pay"]


def test_missing_topic_is_created_with_mapped_rf_and_capped_min_isr():
    plan = plan_topics(SPEC, {"orders": topic("orders")}, {}, destination_brokers=1)
    (action,) = plan.actions
    assert (action.action, action.partitions, action.replication_factor) == ("create", 3, 1)
    assert action.configs == {"cleanup.policy": "delete", "retention.ms": "1000", "min.insync.replicas": "1",
                              **LIFTED}
    assert "segment.bytes" not in action.configs  # cluster tuning is not mirrored


def test_identical_destination_needs_nothing():
    source = topic("orders", rf=1, **{"min.insync.replicas": "1", **LIFTED})
    plan = plan_topics(SPEC, {"orders": source}, {"orders": source}, destination_brokers=1)
    assert plan.changes == () and plan.refusals == ()


def test_growth_and_config_drift_are_planned_together():
    plan = plan_topics(SPEC, {"orders": topic("orders", 6, rf=1)},
                       {"orders": topic("orders", 4, rf=1, **{"retention.ms": "5"})}, destination_brokers=1)
    (action,) = plan.changes
    assert action.action == "grow+alter"
    assert action.config_changes == {"retention.ms": ("5", "1000"), "min.insync.replicas": ("2", "1"),
                                     **{name: (None, value) for name, value in LIFTED.items()}}
    assert "partitions 4 -> 6" in action.describe()


def test_a_log_append_time_source_gets_a_create_time_mirror_also_where_one_exists_as_log_append_time():
    source = topic("orders", rf=1, **{"min.insync.replicas": "1", TIMESTAMP_TYPE: "LogAppendTime"})
    created = plan_topics(SPEC, {"orders": source}, {}, destination_brokers=1)
    assert created.actions[0].configs[TIMESTAMP_TYPE] == "CreateTime"
    time = created.actions[0].time
    assert time is not None and time.at_promotion[TIMESTAMP_TYPE] == "LogAppendTime"

    earlier_mirror = topic("orders", rf=1, **{"min.insync.replicas": "1", **LIFTED, TIMESTAMP_TYPE: "LogAppendTime"})
    (action,) = plan_topics(SPEC, {"orders": source}, {"orders": earlier_mirror}, destination_brokers=1).changes
    assert action.config_changes == {TIMESTAMP_TYPE: ("LogAppendTime", "CreateTime")}
    assert created.timestamp_lines()[0] == (
        "orders: source orders is LogAppendTime; the mirror is CreateTime while copying (records keep the source's "
        "append times) and LogAppendTime from promotion on")


def test_every_refusal_is_reported_at_once():
    plan = plan_topics(
        SPEC,
        {"orders": topic("orders", 2), "pay": topic("pay", 1, **{"cleanup.policy": "compact"})},
        {"orders": topic("orders", 4), "pay": topic("pay", 1)},
        destination_brokers=3,
    )
    with pytest.raises(ProvisioningRefused) as raised:
        plan.raise_if_refused()
    assert len(raised.value.refusals) == 2
    assert "orders: destination has 4 partitions" in str(raised.value)
    assert "pay: cleanup.policy is delete on the destination but compact" in str(raised.value)


def test_cleanup_policy_order_does_not_matter():
    plan = plan_topics(SPEC, {"pay": topic("pay", **{"cleanup.policy": "compact,delete"})},
                       {"pay": topic("pay", **{"cleanup.policy": "delete, compact"})}, destination_brokers=3)
    assert plan.refusals == ()


def test_prefix_rename_collision_is_refused():
    spec = parse_spec({**SPEC.model_dump(by_alias=True), "topics": {"include": [".*"], "rename": {
        "policy": "prefix", "prefix": "x"}}})
    plan = plan_topics(spec, {"a": topic("a"), "xa": topic("xa")}, {}, destination_brokers=3)
    assert plan.refusals == ()  # "xa" and "xxa" are distinct
    assert [a.destination_topic for a in plan.actions] == ["xa", "xxa"]


def test_groups_plan_selects_skips_and_refuses():
    plan = plan_groups(
        SPEC,
        {"g-a": {"orders", "other"}, "g-b": {"other"}, "h": {"orders"}, "g-live": {"pay"}},
        migrated_topics={"orders", "pay"},
        destination_groups={"g-live": GroupInfo("g-live", "STABLE", 2), "g-a": GroupInfo("g-a", "EMPTY", 0)},
    )
    assert plan.migrated == {"g-a": ("orders",)}
    assert plan.skipped == {"g-b": "no committed offsets on migrated topics",
                            "h": "not selected by groups.include/exclude"}
    assert plan.refusals == ("group g-live: has 2 active member(s) on the destination (state STABLE); "
                             "stop those consumers before migrating its offsets",)


def test_a_promoted_group_is_left_alone_and_an_unpromoted_one_with_members_is_still_refused():
    """Staged cutover: a promoted group's consumers read on the destination; catch-up runs must not refuse them."""
    plan = plan_groups(
        SPEC, {"g-moved": {"orders"}, "g-early": {"orders"}, "g-quiet": {"pay"}},
        migrated_topics={"orders", "pay"},
        destination_groups={"g-moved": GroupInfo("g-moved", "STABLE", 1), "g-early": GroupInfo("g-early", "STABLE", 1)},
        promoted_groups=["g-moved"],
    )
    assert plan.promoted == {"g-moved": ("orders",)}
    assert plan.migrated == {"g-quiet": ("pay",)}  # the promoted group is not recorded again
    assert plan.refusals == ("group g-early: has 1 active member(s) on the destination (state STABLE); "
                             "stop those consumers before migrating its offsets",)
    assert plan.as_dict()["promoted"] == {"g-moved": ["orders"]}
    with pytest.raises(ProvisioningRefused, match="group g-early: has 1 active member") as refused:
        plan.raise_if_refused()
    assert "g-moved" not in str(refused.value)


def test_a_promoted_group_needs_no_member_check_in_any_destination_state():
    for state, members in (("STABLE", 3), ("PREPARINGREBALANCE", 0), ("EMPTY", 0)):
        plan = plan_groups(SPEC, {"g-a": {"orders"}}, {"orders"}, {"g-a": GroupInfo("g-a", state, members)},
                           promoted_groups={"g-a"})
        assert (plan.refusals, dict(plan.migrated), dict(plan.promoted)) == ((), {}, {"g-a": ("orders",)})
