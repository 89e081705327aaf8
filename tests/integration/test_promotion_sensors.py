"""The four promotion sensors against real brokers, in poke mode (poke()) and deferred (the trigger's run())."""

from __future__ import annotations

import asyncio
import time

import pytest
from airflow.sdk.exceptions import TaskDeferred
from scenarios import one_group_migration, seed_plain

from kafka_ferry.promotion.steps import PromotionRunner
from kafka_ferry.sensors.promotion_sensors import (
    GroupOffsetsSyncedSensor,
    ReplicationLagSensor,
    SourceGroupsInactiveSensor,
    SourceQuiescedSensor,
)

pytestmark = pytest.mark.integration


def first_event(trigger, timeout: float):
    """The trigger's first event, or None if it yields nothing within ``timeout`` (still polling)."""

    async def go():
        events = trigger.run()
        try:
            return (await asyncio.wait_for(events.__anext__(), timeout)).payload
        except TimeoutError:
            return None
        finally:
            await events.aclose()

    return asyncio.run(go())


@pytest.fixture()
def mig(clusters, tmp_path):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "sn", 2, 12, {0: 5, 1: 7})
    runner = PromotionRunner(spec, clusters.cluster("source"), clusters.cluster("destination"), work_dir=tmp_path / "w")
    return {"p": p, "topic": topic, "spec_path": spec_path, "spec": spec, "runner": runner}


def sensor(cls, mig, deferrable=False, **kwargs):
    return cls(task_id=cls.__name__, spec_path=mig["spec_path"], deferrable=deferrable, poke_interval=0.3,
               timeout=60, **kwargs)


def deferred_trigger(s):
    with pytest.raises(TaskDeferred) as deferred:
        s.execute({})
    return deferred.value.trigger


def test_replication_lag_sensor(clusters, mig):
    lag = sensor(ReplicationLagSensor, mig, max_lag=0)
    assert not lag.poke({}).is_done
    trigger = deferred_trigger(sensor(ReplicationLagSensor, mig, deferrable=True, max_lag=0))
    assert first_event(trigger, 1.5) is None  # 12 records per partition not copied: keeps polling
    assert sensor(ReplicationLagSensor, mig, max_lag=12).poke({}).is_done

    mig["runner"].run(steps=("final_copy",))

    assert lag.poke({}).is_done
    event = first_event(trigger, 10)
    assert event["status"] == "success" and event["details"]["max_lag"] == 0
    assert sensor(ReplicationLagSensor, mig, deferrable=True).execute({})["max_lag"] == 0  # ready: no deferral


def test_source_quiesced_sensor(clusters, mig):
    quiet = sensor(SourceQuiescedSensor, mig, window_seconds=1)
    assert not quiet.poke({}).is_done  # first observation starts the window
    time.sleep(1.2)
    assert quiet.poke({}).is_done
    seed_plain(clusters, mig["topic"], 2, 1)
    assert not quiet.poke({}).is_done  # a producer wrote: the window restarts

    seed_plain(clusters, mig["topic"], 2, 1)
    trigger = deferred_trigger(sensor(SourceQuiescedSensor, mig, deferrable=True, window_seconds=3))
    started = time.monotonic()
    event = first_event(trigger, 15)
    assert event["status"] == "success" and event["details"]["unchanged_for_s"] >= 3
    assert 3 <= time.monotonic() - started < 10


def test_source_groups_inactive_sensor(clusters, mig):
    live = clusters.consumer("source", f"{mig['p']}-g")
    live.subscribe([mig["topic"]])
    deadline = time.monotonic() + 30
    while not live.assignment() and time.monotonic() < deadline:
        live.poll(0.2)
    try:
        assert not sensor(SourceGroupsInactiveSensor, mig).poke({}).is_done
        trigger = deferred_trigger(sensor(SourceGroupsInactiveSensor, mig, deferrable=True))
        assert first_event(trigger, 1.5) is None
    finally:
        live.close()
    assert sensor(SourceGroupsInactiveSensor, mig).poke({}).is_done
    event = first_event(trigger, 10)
    assert event == {"status": "success", "details": {"active": {}}}


def test_group_offsets_synced_sensor(clusters, mig):
    synced = sensor(GroupOffsetsSyncedSensor, mig)
    assert not synced.poke({}).is_done
    mig["runner"].run(steps=("final_copy", "final_translation"))
    result = synced.poke({})
    assert not result.is_done and f"{mig['p']}-g" in result.xcom_value["mismatches"]
    trigger = deferred_trigger(sensor(GroupOffsetsSyncedSensor, mig, deferrable=True))
    assert first_event(trigger, 1.5) is None

    mig["runner"].run(steps=("commit_offsets",))

    assert synced.poke({}).is_done
    assert first_event(trigger, 10) == {"status": "success", "details": {"mismatches": {}}}


def test_a_failing_check_reports_an_error_event(clusters, mig):
    from kafka_ferry.triggers.promotion_triggers import SourceGroupsInactiveTrigger

    event = first_event(SourceGroupsInactiveTrigger("no_such_connection", ["g"], 0.1), 10)
    assert event["status"] == "error" and "no_such_connection" in event["message"]
    with pytest.raises(Exception, match="no_such_connection"):
        sensor(SourceGroupsInactiveSensor, mig, deferrable=True).execute_complete({}, event)
