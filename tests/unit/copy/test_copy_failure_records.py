"""Which copy failures come back as a failure record (no retry) and which keep the task's retries."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

from kafka_ferry.copy.copy_failures import (
    UnmappedSchemaId,
    failure_record,
    first_failure,
    stored_failure,
    write_failure,
)
from kafka_ferry.copy.delivery import CopyError
from kafka_ferry.copy.runner import PlannedTopicMissing
from kafka_ferry.kafka.errors import KafkaClusterError


def recorded(exc: BaseException) -> dict[str, Any]:
    """The failure record of a failure no retry heals (one that may heal has none)."""
    record = failure_record(exc)
    assert record is not None, exc
    return record


def test_deterministic_failures_become_records_naming_the_record():
    record = recorded(UnmappedSchemaId("orders", 1, 12, "value", 46))
    assert (record["topic"], record["partition"], record["offset"], record["schema_id"]) == ("orders", 1, 12, 46)
    assert "orders-1 at offset 12: the value carries schema id 46" in record["message"]
    assert recorded(PlannedTopicMissing("planned partitions no longer exist"))["kind"] == "PlannedTopicMissing"
    refused = KafkaClusterError("dst", "copy t-0", KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    assert recorded(refused)["kind"] == "refused"


def test_failures_that_may_heal_keep_their_retries():
    assert failure_record(KafkaClusterError("dst", "copy t-0", KafkaError(KafkaError._TRANSPORT))) is None
    assert failure_record(CopyError("no record for 60 s")) is None
    assert failure_record(RuntimeError("worker died")) is None


def test_the_record_travels_beside_the_report(tmp_path):
    report = tmp_path / "batch.report.json"
    assert stored_failure(report) is None
    write_failure(report, {"message": "m", "kind": "refused"})
    assert stored_failure(report) == {"message": "m", "kind": "refused"}
    assert first_failure([{"partition": 0}, {"failure": {"message": "x"}}]) == {"message": "x"}
