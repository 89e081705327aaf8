"""The batch runner's run step (``copy.batch_runner.run_partitions``): what every engine's result becomes."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore

from kafka_ferry.copy.batch import BatchClients
from kafka_ferry.copy.batch_runner import run_partitions
from kafka_ferry.copy.copy_failures import CopyFailed, UnmappedSchemaId
from kafka_ferry.copy.lease import process_started
from kafka_ferry.copy.plan import CopyPlan, PartitionTask
from kafka_ferry.copy.report import PartitionResult
from kafka_ferry.copy.runner import PlannedTopicMissing
from kafka_ferry.core.batches.copy_lease import Claim
from kafka_ferry.core.common.failures import Permanent, retry_cannot_help
from kafka_ferry.task_support import is_deterministic

ROWS = [{"source_topic": "t", "partition": 0, "records_copied": 3}]


def engine(result):
    def run(plan, configs, fault):
        if isinstance(result, BaseException):
            raise result
        return result
    return run


def test_rows_come_back_as_the_engine_returned_them():
    assert run_partitions(_plan(), {}, engine(ROWS)) == ROWS


def test_a_failure_row_a_spark_task_returned_fails_the_batch_once_with_its_record():
    record = {"message": "t-0 at offset 7: the value carries schema id 9", "kind": "unmapped-schema-id"}
    with pytest.raises(CopyFailed, match="schema id 9") as raised:
        run_partitions(_plan(), {}, engine([*ROWS, {"failure": record}]))
    assert raised.value.record == record and is_deterministic(raised.value)


@pytest.mark.parametrize("error", [UnmappedSchemaId("t", 0, 7, "value", 9),
                                   PlannedTopicMissing("batch b: planned partitions no longer exist: source t-0")])
def test_a_permanent_failure_raised_in_process_becomes_the_same_record(error):
    with pytest.raises(CopyFailed) as raised:
        run_partitions(_plan(), {}, engine(error))
    assert raised.value.record["message"] == str(error) and raised.value.__cause__ is error


def test_a_failure_that_may_heal_propagates_as_it_is():
    error = TimeoutError("broker down")
    with pytest.raises(TimeoutError) as raised:
        run_partitions(_plan(), {}, engine(error))
    assert raised.value is error and not retry_cannot_help(error)


def test_an_exception_declares_permanence_itself():
    class Refused(Permanent, ValueError):
        pass

    assert retry_cannot_help(Refused("no")) and is_deterministic(Refused("no"))
    assert not retry_cannot_help(ValueError("maybe"))


# --- run_batch: the lease is claimed and the topics checked while the engine starts -------------------------
# The clusters are the in-memory ones of tests/fakes: the lease, the check, the batch record and the withdrawal are
# what each leaves on them (the state topic's records, the metadata asked), in that order.
STATE = "kafka-ferry.m.state"


def _plan() -> CopyPlan:
    return CopyPlan(migration="m", batch_id="b1", source_cluster_id="s", destination_cluster_id="d",
                    state_topic=STATE, offset_syncs_topic="os", provenance_headers=True, offset_sync_interval=10,
                    max_records_per_partition=10, max_bytes_per_partition=10,
                    tasks=(PartitionTask("t", 0, "t", 0, 3),), lag_before={"t:0": 3})


def _lease_held_elsewhere(store: FakeStateStore) -> None:
    """A live copy job of another batch holds the lease (this process stands for it: it is alive)."""
    pid = os.getpid()
    now = int(time.time() * 1000)
    claim = Claim(token="other", migration="m", batch_id="b2", host="h", pid=pid,
                  pid_started=process_started(pid) or "", claimed_at_ms=now, expires_at_ms=now + 600_000)
    store.fake.produce_and_wait(STATE, [(claim.key.encode(), claim.to_json())], partition=0)


@pytest.fixture()
def batch(tmp_path):
    """run_batch on fake clusters with this engine; returns (what happened in order, what run_batch raised)."""
    from contextlib import contextmanager

    from kafka_ferry.copy import batch_runner

    def run(held_by_other: bool = False, topic_deleted: bool = False, engine_fails: bool = False):
        source, destination = FakeCluster("source"), FakeCluster("destination")
        for cluster in (source, destination):
            cluster.create_topic("t", 1, 1, {})
        source.produce_and_wait("t", [(b"k", b"v")] * 3, partition=0)
        store = FakeStateStore(destination, STATE).created()
        if held_by_other:
            _lease_held_elsewhere(store)
        if topic_deleted:
            del destination.topics["t"]  # deleted after planning
        start = len(store.log)
        copied_at: list[int] = []
        asked_before_copy: list[tuple[Any, ...]] = []

        @contextmanager
        def engine():
            if engine_fails:
                raise RuntimeError("the Spark master refused the application")
            def run_tasks(plan, configs, fault):
                copied_at.append(len(store.log))
                asked_before_copy.extend(r for r in source.requests + destination.requests
                                         if r[0] == "list_partitions")
                return [PartitionResult("t", 0, "t", 0, 3, 0, 3, records_copied=3).as_dict()]

            yield run_tasks

        clients = BatchClients({}, source=source, destination=destination, lease=destination, closing=destination)
        error = None
        try:
            batch_runner.run_batch(_plan(), {}, engine, str(tmp_path / "report.json"), clients=clients)
        except Exception as exc:  # noqa: BLE001 - the test asserts on it
            error = exc
        events = []
        for i, (key, value) in enumerate(store.log[start:], start):
            if copied_at and copied_at[0] == i:
                events.append("copied")
            assert key is not None  # every state record has a key
            name = key.decode().split("/")[0]
            events.append({"copy-lease": "acquired" if value is not None else "released",
                           "batch": "finished"}.get(name, name))
        if copied_at and copied_at[0] == len(store.log):
            events.append("copied")
        checked = [r for r in source.requests + destination.requests if r[0] == "list_partitions"]
        if copied_at:
            assert asked_before_copy == checked  # every check was made before the first record moved
        return events, checked, error

    return run


def test_a_claimed_and_checked_batch_copies_inside_the_lease(batch):
    events, checked, error = batch()
    assert error is None and events == ["acquired", "copied", "finished", "released"]
    assert [c[1] for c in checked] == [("t",), ("t",)]  # both clusters' partitions, before the copy


def test_a_lease_held_elsewhere_copies_nothing_and_releases_nothing(batch):
    from kafka_ferry.core.batches.copy_lease import CopyLeaseHeld

    events, checked, error = batch(held_by_other=True)
    assert isinstance(error, CopyLeaseHeld) and "batch b2" in str(error)
    assert "copied" not in events and "finished" not in events and checked == []
    assert events == ["acquired", "released"]  # its own claim, read back behind the holder's, withdrawn at once


def test_a_topic_deleted_after_planning_fails_once_with_its_record_and_copies_nothing(batch):
    events, checked, error = batch(topic_deleted=True)
    assert isinstance(error, CopyFailed) and "planned partitions no longer exist: destination t-0" in (
        error.record["message"])
    assert "copied" not in events and events[-1] == "released" and len(checked) == 2


def test_an_engine_that_fails_to_start_withdraws_the_claim(batch):
    events, checked, error = batch(engine_fails=True)
    assert isinstance(error, RuntimeError) and "refused" in str(error)
    assert events == ["acquired", "released"] and len(checked) == 2
