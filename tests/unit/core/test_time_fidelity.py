"""The mirror topic's timestamp configs while copying and after promotion."""

from __future__ import annotations

from kafka_ferry.core.provisioning.time_fidelity import (
    AFTER_MAX_MS,
    BEFORE_MAX_MS,
    DIFFERENCE_MAX_MS,
    TIMESTAMP_TYPE,
    UNLIMITED,
    TopicTimePlan,
    plan_topic_time,
)

# effective configs as Kafka 3.9 (source) and 4.3 (destination) report them for a topic without overrides
SOURCE_DEFAULTS = {TIMESTAMP_TYPE: "CreateTime", BEFORE_MAX_MS: UNLIMITED, AFTER_MAX_MS: UNLIMITED,
                   DIFFERENCE_MAX_MS: UNLIMITED}
DESTINATION_DEFAULTS = {TIMESTAMP_TYPE: "CreateTime", BEFORE_MAX_MS: UNLIMITED, AFTER_MAX_MS: "3600000"}
LIFTED = {TIMESTAMP_TYPE: "CreateTime", BEFORE_MAX_MS: UNLIMITED, AFTER_MAX_MS: UNLIMITED}


def test_a_log_append_time_source_gets_a_create_time_mirror_switched_at_promotion():
    plan = plan_topic_time("orders", "a.orders", {**SOURCE_DEFAULTS, TIMESTAMP_TYPE: "LogAppendTime"}, None)

    assert plan.during == LIFTED
    assert plan.at_promotion == {TIMESTAMP_TYPE: "LogAppendTime", BEFORE_MAX_MS: None, AFTER_MAX_MS: None}
    assert plan.describe() == [
        "a.orders: source orders is LogAppendTime; the mirror is CreateTime while copying (records keep the source's "
        "append times) and LogAppendTime from promotion on",
        f"a.orders: {BEFORE_MAX_MS} unlimited while copying (records of any age are kept), back to the destination "
        "broker's default at promotion",
        f"a.orders: {AFTER_MAX_MS} unlimited while copying (records of any age are kept), back to the destination "
        "broker's default at promotion",
    ]


def test_an_existing_mirror_gets_its_own_limits_back_and_a_create_time_source_keeps_create_time():
    existing = {**DESTINATION_DEFAULTS, BEFORE_MAX_MS: "86400000"}
    plan = plan_topic_time("t", "t", SOURCE_DEFAULTS, existing)

    assert plan.during == LIFTED
    assert plan.at_promotion == {BEFORE_MAX_MS: "86400000", AFTER_MAX_MS: "3600000"}
    assert plan.describe() == [
        f"t: {BEFORE_MAX_MS} unlimited while copying (records of any age are kept), back to 86400000 at promotion",
        f"t: {AFTER_MAX_MS} unlimited while copying (records of any age are kept), back to 3600000 at promotion"]


def test_a_later_provisioning_keeps_the_recorded_values_not_the_lifted_ones():
    first = plan_topic_time("t", "t", SOURCE_DEFAULTS, {**DESTINATION_DEFAULTS, BEFORE_MAX_MS: "86400000"})
    lifted_now = {**DESTINATION_DEFAULTS, **first.during}

    assert plan_topic_time("t", "t", SOURCE_DEFAULTS, lifted_now, recorded=first) == first
    assert plan_topic_time("t", "t", SOURCE_DEFAULTS, lifted_now).at_promotion == {}  # what a plan without memory does


def test_difference_max_ms_is_lifted_only_where_the_destination_still_has_it():
    three_x_destination = {**DESTINATION_DEFAULTS, DIFFERENCE_MAX_MS: "3600000"}
    plan = plan_topic_time("t", "t", SOURCE_DEFAULTS, three_x_destination)
    assert plan.during[DIFFERENCE_MAX_MS] == UNLIMITED and plan.at_promotion[DIFFERENCE_MAX_MS] == "3600000"
    assert DIFFERENCE_MAX_MS not in plan_topic_time("t", "t", SOURCE_DEFAULTS, DESTINATION_DEFAULTS).during


def test_the_plan_round_trips_through_its_state_record():
    plan = plan_topic_time("t", "u", {**SOURCE_DEFAULTS, TIMESTAMP_TYPE: "LogAppendTime"}, None)
    assert TopicTimePlan.from_record(plan.as_record()) == plan
