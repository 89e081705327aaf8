"""Every promotion trigger rebuilds from its serialized form, which holds only primitives."""

from __future__ import annotations

import importlib
import json

import pytest

from kafka_ferry.triggers.promotion_triggers import (
    GroupOffsetsSyncedTrigger,
    ReplicationLagTrigger,
    SourceGroupsInactiveTrigger,
    SourceQuiescedTrigger,
)

TRIGGERS = [
    ReplicationLagTrigger("src", "dst", "kafka-ferry.m.state", ["a", "b"], 0, 5),
    SourceQuiescedTrigger("src", ["a"], 30, 5),
    SourceGroupsInactiveTrigger("src", ["g1", "g2"], 5),
    GroupOffsetsSyncedTrigger("dst", "kafka-ferry.m.state", 5),
]


@pytest.mark.parametrize("trigger", TRIGGERS, ids=lambda t: type(t).__name__)
def test_rebuilds_from_serialized_form(trigger):
    classpath, kwargs = trigger.serialize()
    assert json.loads(json.dumps(kwargs)) == kwargs  # primitives only
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert type(rebuilt) is type(trigger)
    assert rebuilt.serialize() == (classpath, kwargs)


class _Ahead(GroupOffsetsSyncedTrigger):
    """The synced gate's trigger finding a group ahead of the translation while deferred."""

    async def prepare(self) -> None:
        pass

    def check(self):
        from kafka_ferry.core.offsets.groups_ahead import refuse_groups_ahead

        refuse_groups_ahead("m", {"g": {("t", 0): 5}}, {"g": {("t", 0): 9}})


class _Unreachable(_Ahead):
    def check(self):
        raise ConnectionError("broker down")


def first_event(trigger) -> dict:
    import asyncio

    async def first():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first())


def test_a_permanent_error_while_deferred_fails_the_sensor_once_a_transient_one_keeps_its_retries():
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from kafka_ferry.sensors.promotion_sensors import GroupOffsetsSyncedSensor

    ahead, down = first_event(_Ahead("dst", "s", 5)), first_event(_Unreachable("dst", "s", 5))
    assert (ahead["status"], ahead["permanent"], down["permanent"]) == ("error", True, False)
    assert "group g t-0 committed at 9, translation 5" in ahead["message"]
    sensor = GroupOffsetsSyncedSensor(task_id="group_offsets_synced", spec_path="m.yaml")
    with pytest.raises(AirflowFailException, match="allow_rewind"):
        sensor.execute_complete({}, ahead)
    with pytest.raises(AirflowException) as transient:
        sensor.execute_complete({}, down)
    assert not isinstance(transient.value, AirflowFailException)
