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
