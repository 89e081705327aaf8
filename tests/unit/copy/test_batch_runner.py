"""The batch runner's run step (``copy.batch_runner.run_partitions``): what every engine's result becomes."""

from __future__ import annotations

import pytest

from kafka_ferry.copy.batch_runner import run_partitions
from kafka_ferry.copy.copy_failures import CopyFailed, UnmappedSchemaId
from kafka_ferry.copy.runner import PlannedTopicMissing
from kafka_ferry.core.failures import Permanent, retry_cannot_help
from kafka_ferry.task_support import is_deterministic

ROWS = [{"source_topic": "t", "partition": 0, "records_copied": 3}]


def engine(result):
    def run(plan, configs, fault):
        if isinstance(result, BaseException):
            raise result
        return result
    return run


def test_rows_come_back_as_the_engine_returned_them():
    assert run_partitions(None, {}, engine(ROWS)) == ROWS


def test_a_failure_row_a_spark_task_returned_fails_the_batch_once_with_its_record():
    record = {"message": "t-0 at offset 7: the value carries schema id 9", "kind": "unmapped-schema-id"}
    with pytest.raises(CopyFailed, match="schema id 9") as raised:
        run_partitions(None, {}, engine([*ROWS, {"failure": record}]))
    assert raised.value.record == record and is_deterministic(raised.value)


@pytest.mark.parametrize("error", [UnmappedSchemaId("t", 0, 7, "value", 9),
                                   PlannedTopicMissing("batch b: planned partitions no longer exist: source t-0")])
def test_a_permanent_failure_raised_in_process_becomes_the_same_record(error):
    with pytest.raises(CopyFailed) as raised:
        run_partitions(None, {}, engine(error))
    assert raised.value.record["message"] == str(error) and raised.value.__cause__ is error


def test_a_failure_that_may_heal_propagates_as_it_is():
    error = TimeoutError("broker down")
    with pytest.raises(TimeoutError) as raised:
        run_partitions(None, {}, engine(error))
    assert raised.value is error and not retry_cannot_help(error)


def test_an_exception_declares_permanence_itself():
    class Refused(Permanent, ValueError):
        pass

    assert retry_cannot_help(Refused("no")) and is_deterministic(Refused("no"))
    assert not retry_cannot_help(ValueError("maybe"))


# --- run_batch: the lease is claimed and the topics checked while the engine starts -------------------------
class _Lease:
    def __init__(self, held_by_other: bool = False) -> None:
        self.held_by_other, self.events = held_by_other, []

    def acquire(self):
        from kafka_ferry.core.copy_lease import CopyLeaseHeld

        if self.held_by_other:
            raise CopyLeaseHeld("migration m: batch b2 holds the copy lease")
        self.events.append("acquired")

    def release(self):
        self.events.append("released")

    def __enter__(self):
        self.events.append("entered")
        return self

    def __exit__(self, *exc):
        self.release()


class _Plan:
    is_empty, batch_id, migration = False, "b1", "m"


@pytest.fixture()
def batch(monkeypatch):
    """run_batch with this lease, these topic checks and this engine; returns (events, what run_batch did)."""
    from contextlib import contextmanager

    from kafka_ferry.copy import batch_runner

    def run(lease: _Lease, topics_problem: Exception | None = None, engine_fails: bool = False):
        events = lease.events
        monkeypatch.setattr(batch_runner, "copy_lease", lambda plan, configs: lease)
        monkeypatch.setattr(batch_runner, "state_clients", lambda configs: None)
        monkeypatch.setattr(batch_runner, "finish_batch", lambda *a, **k: events.append("finished") or {})
        monkeypatch.setattr(batch_runner, "report_lines", lambda report: [])

        def check(plan, configs):
            events.append("checked")
            if topics_problem is not None:
                raise topics_problem

        monkeypatch.setattr(batch_runner, "check_planned_topics", check)

        @contextmanager
        def engine():
            if engine_fails:
                raise RuntimeError("the Spark master refused the application")
            yield lambda plan, configs, fault: events.append("copied") or ROWS

        try:
            batch_runner.run_batch(_Plan(), {}, engine, "/unused/report.json")
        except Exception as exc:  # noqa: BLE001 - the test asserts on it
            return events, exc
        return events, None

    return run


def test_a_claimed_and_checked_batch_copies_inside_the_lease(batch):
    events, error = batch(_Lease())
    assert error is None and events == ["acquired", "checked", "entered", "copied", "finished", "released"]


def test_a_lease_held_elsewhere_copies_nothing_and_releases_nothing(batch):
    from kafka_ferry.core.copy_lease import CopyLeaseHeld

    events, error = batch(_Lease(held_by_other=True))
    assert isinstance(error, CopyLeaseHeld) and events == []


def test_a_topic_deleted_after_planning_fails_once_with_its_record_and_copies_nothing(batch):
    problem = PlannedTopicMissing("batch b1: planned partitions no longer exist: source t-0")
    events, error = batch(_Lease(), topics_problem=problem)
    assert isinstance(error, CopyFailed) and error.record["message"] == str(problem)
    assert "copied" not in events and events[-1] == "released"


def test_an_engine_that_fails_to_start_withdraws_the_claim(batch):
    events, error = batch(_Lease(), engine_fails=True)
    assert isinstance(error, RuntimeError) and "refused" in str(error)
    assert events == ["acquired", "checked", "released"]
