"""Ownership of destination topics: only created, recorded or (safely) adopted mirrors are provisioned."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.common.cluster_model import TopicInfo
from kafka_ferry.core.common.state_records import state_topic_problem
from kafka_ferry.core.provisioning.provisioning_plan import plan_topics
from kafka_ferry.core.provisioning.topic_ownership import (
    ADOPT,
    CREATE,
    OWNED,
    REFUSED,
    TopicContents,
    decide_ownership,
    destructive_changes,
    shortens,
)
from kafka_ferry.core.specs.spec import SpecError, parse_spec

DOC = {"name": "m", "tenant": "t", "source": {"connection_id": "s", "alias": "src"},
       "destination": {"connection_id": "d", "alias": "dst"}, "topics": {"include": ["x\\..*"]}}
SPEC = parse_spec(DOC)
HOUR, MONTH = "3600000", str(30 * 24 * 3600 * 1000)


def source(name="x.orders", **configs):
    return TopicInfo(name, 2, 1, {"cleanup.policy": "delete", "retention.ms": HOUR, **configs})


def decide(destination: TopicInfo | None, owned=(), adopt=(), contents=None):
    dests = {destination.name: destination} if destination else {}
    plan = plan_topics(SPEC, {"x.orders": source()}, dests, destination_brokers=1)
    return decide_ownership("m", plan.actions, dests, owned, adopt, contents or {})


def foreign_topic(**configs):
    return TopicInfo("x.orders", 2, 1, {"cleanup.policy": "delete", "retention.ms": MONTH, **configs})


def test_a_missing_mirror_is_created():
    plan = decide(None)
    assert [(d.destination_topic, d.status) for d in plan.decisions] == [("x.orders", CREATE)]
    assert plan.refusals == ()


def test_a_foreign_topic_is_refused_naming_records_and_differing_configs():
    plan = decide(foreign_topic(), contents={"x.orders": TopicContents(5)})
    (refusal,) = plan.refusals
    assert refusal.startswith("x.orders: exists on the destination and was not created by migration m (5 records; "
                              "configs that differ: ")
    assert f"retention.ms: '{MONTH}' -> '{HOUR}'" in refusal
    assert "topics.adopt" in refusal
    assert plan.decisions[0].status == REFUSED


def test_a_recorded_mirror_is_provisioned_as_before():
    plan = decide(foreign_topic(), owned={"x.orders"})
    assert plan.refusals == () and plan.decisions[0].status == OWNED


def test_an_empty_adopted_topic_is_taken_over_and_shows_every_change():
    plan = decide(foreign_topic(), adopt={"x.orders"}, contents={"x.orders": TopicContents(0, 0)})
    assert plan.refusals == ()
    (decision,) = plan.decisions
    assert decision.status == ADOPT
    assert f"retention.ms: '{MONTH}' -> '{HOUR}'" in decision.changes
    assert plan.as_dict()["adopt"]["x.orders"] == list(decision.changes)


def test_an_adopted_topic_with_only_this_migrations_records_is_taken_over():
    plan = decide(foreign_topic(), adopt={"x.orders"}, contents={"x.orders": TopicContents(300, 0)})
    assert plan.refusals == () and plan.decisions[0].status == ADOPT


@pytest.mark.parametrize("contents", [TopicContents(5, 5), TopicContents(305, 5),
                                      TopicContents(10**9, None, "more than 200000 records to check")])
def test_an_adopted_topic_with_foreign_or_unchecked_records_is_refused(contents):
    plan = decide(foreign_topic(), adopt={"x.orders"}, contents={"x.orders": contents})
    (refusal,) = plan.refusals
    assert "topics.adopt lists it but" in refusal and "not adopted" in refusal


@pytest.mark.parametrize(("old", "new", "shorter"), [
    (MONTH, HOUR, True), (HOUR, MONTH, False), ("-1", HOUR, True), (HOUR, "-1", False), ("-1", "-1", False),
    (None, HOUR, True), (HOUR, None, False), ("junk", HOUR, True), (HOUR, HOUR, False)])
def test_shortens(old, new, shorter):
    assert shortens(old, new) is shorter


def test_destructive_changes_name_retention_and_cleanup_policy():
    plan = plan_topics(SPEC, {"x.orders": source(**{"retention.bytes": "10"})}, {}, destination_brokers=1)
    existing = foreign_topic(**{"cleanup.policy": "compact", "retention.bytes": "-1"})
    assert destructive_changes(plan.actions[0], existing) == [
        f"retention.ms '{MONTH}' -> '{HOUR}' (shorter)", "retention.bytes '-1' -> '10' (shorter)",
        "cleanup.policy 'compact' -> 'delete'"]


limits = st.one_of(st.none(), st.sampled_from(["-1", "0", "1000", HOUR, MONTH]))


@given(dest_ms=limits, dest_bytes=limits, src_ms=limits, records=st.integers(0, 10), foreign=st.none() |
       st.integers(0, 10), owned=st.booleans(), adopted=st.booleans(),
       dest_policy=st.sampled_from(["delete", "compact", "compact,delete"]))
def test_never_a_destructive_change_to_a_topic_holding_others_records(dest_ms, dest_bytes, src_ms, records, foreign,
                                                                     owned, adopted, dest_policy):
    """Whatever the inputs: a plan without refusals never shortens retention nor changes cleanup.policy of a
    topic not recorded as the migration's that may hold records of others; and never adopts such a topic."""
    foreign = None if foreign is None else min(foreign, records)
    dest_configs = {k: v for k, v in (("retention.ms", dest_ms), ("retention.bytes", dest_bytes)) if v is not None}
    existing = TopicInfo("x.orders", 2, 1, {"cleanup.policy": dest_policy, **dest_configs})
    src = TopicInfo("x.orders", 2, 1, {"cleanup.policy": "delete", **({"retention.ms": src_ms} if src_ms else {})})
    topic_plan = plan_topics(SPEC, {"x.orders": src}, {"x.orders": existing}, destination_brokers=1)
    contents = TopicContents(records, foreign)
    plan = decide_ownership("m", topic_plan.actions, {"x.orders": existing}, {"x.orders"} if owned else set(),
                            {"x.orders"} if adopted else set(), {"x.orders": contents})
    (decision,) = plan.decisions
    if owned:
        assert decision.status == OWNED
        return
    if contents.may_hold_foreign:
        assert decision.status == REFUSED and plan.refusals
    if not plan.refusals and not topic_plan.refusals:
        assert decision.status == ADOPT and not contents.may_hold_foreign


@pytest.mark.parametrize(("partitions", "policy", "problem"), [
    (1, "compact", None), (3, "compact", "3 partition(s) and cleanup.policy compact"),
    (1, "delete", "1 partition(s) and cleanup.policy delete"), (1, None, "cleanup.policy delete"),
    (1, "compact,delete", "cleanup.policy compact,delete")])
def test_state_topic_shape(partitions, policy, problem):
    found = state_topic_problem("kafka-ferry.m.state", partitions, policy)
    assert found is None if problem is None else (
        found is not None and problem in found and "kafka-ferry.m.state" in found)


def test_spec_adopt_names_are_checked():
    spec = parse_spec({**DOC, "topics": {"include": ["x\\..*"], "adopt": ["x.orders"]}})
    assert spec.topics.adopt == ("x.orders",)
    with pytest.raises(SpecError, match="not a legal Kafka topic name"):
        parse_spec({**DOC, "topics": {"include": ["x"], "adopt": ["bad name"]}})
    with pytest.raises(SpecError, match="listed twice"):
        parse_spec({**DOC, "topics": {"include": ["x"], "adopt": ["a", "a"]}})


def test_an_adopt_name_that_is_no_mirror_is_reported_not_applied():
    plan = decide(None, adopt={"x.orders", "x.ordres"})
    assert plan.unmatched_adopt == ("x.ordres",)
    assert plan.as_dict()["adopt_unmatched"] == ["x.ordres"] and plan.refusals == ()
