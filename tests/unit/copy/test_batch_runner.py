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
