"""What a failed copy says: the first record not copied, the cause (not its consequences), what to do.

A refused record must name the source offset progress stays before, the destination's reason, the ACL to
grant when it is an authorization error and the offending record when it is too large; a failed read
names the offset and, when retention deleted it, that the batch must be planned again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from kafka_ferry.copy.delivery import ChunkAcks, CopyError
from kafka_ferry.copy.plan import PartitionTask
from kafka_ferry.core.common.failures import Permanent, retry_cannot_help
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.storage.workdir import StoragePath, as_path, read_text, write_text

TOO_LARGE_CODES = (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_RECORD)
TOO_LARGE_TEXT = "Message size too large"  # a fatal (gapless) error carries the broker's code only in its text
# What librdkafka reports for records it purged after the real failure: never the cause.
CONSEQUENCE_CODES = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT, KafkaError._GAPLESS_GUARANTEE,
                     KafkaError._FATAL)


def delivery_failure(source, destination, task: PartitionTask, acks: ChunkAcks, fatal: KafkaError | None,
                     exc: Exception | None) -> KafkaClusterError:
    """The destination refused a record: name the first source offset not acknowledged (progress stays
    before it), the cause (not its consequences: after a fatal error librdkafka purges what it held), and
    for an authorization error the ACL to grant, for an oversized record the record."""
    chunks = acks.unacknowledged()
    errors = [e for e in (c.error for c in chunks) if e is not None]
    raised = exc.__context__ if isinstance(exc, SystemError) else exc
    raised = raised.args[0] if isinstance(raised, KafkaException) else None
    causes = [e for e in errors if e.code() not in CONSEQUENCE_CODES] + [fatal, raised] + errors
    error = (next((e for e in causes if e is not None), None) or exc
             or CopyError("the destination refused a record without naming an error"))
    first = next((c for c in chunks if c.error is not None), chunks[0] if chunks else None)
    at = (f" at source offsets {first.upstream[0]}..{chunks[-1].upstream[-1]} (not acknowledged; progress stays "
          f"before {first.upstream[0]})") if first else ""
    too_large = isinstance(error, KafkaError) and (error.code() in TOO_LARGE_CODES or TOO_LARGE_TEXT in error.str())
    if first is not None and too_large:
        at += largest_unacknowledged(source, task, first.upstream[0], chunks[-1].upstream[-1] + 1)
    failure = KafkaClusterError.on(destination, f"copy {task.source_topic}-{task.partition} to "
                                   f"{task.destination_topic}-{task.partition}{at}", error,
                                   acl={"TOPIC": ("WRITE", task.destination_topic)})
    if too_large:
        failure.permanent = True  # the destination refuses the same record on every try
    return failure


def largest_unacknowledged(source, task: PartitionTask, start: int, end: int) -> str:
    """Which record the destination refused as too large: the largest of the unacknowledged ones."""
    from kafka_ferry.kafka.reads import read_ranges

    sizes = [(len(m.key() or b"") + len(m.value() or b""), m.offset())
             for m in read_ranges(source, {(task.source_topic, task.partition): (start, end)})]
    if not sizes:
        return ""
    size, offset = max(sizes)
    return (f"; the largest record not copied is {task.source_topic}-{task.partition} at source offset {offset} "
            f"({size} bytes; raise max.message.bytes of the destination topic or drop the record)")


def read_failure(source, task: PartitionTask, migration: str, offset: int, error: KafkaError) -> Exception:
    """A record could not be read: where, and what to do when retention deleted it after planning."""
    hint = ""
    if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        hint = " (source retention deleted it after planning: plan the batch again)"
    return KafkaClusterError.on(source, f"read {task.source_topic}-{task.partition} at offset {offset}{hint}", error,
                                acl={"TOPIC": ("READ", task.source_topic),
                                     "GROUP": ("DESCRIBE", f"kafka-ferry-copy.{migration}")})


class UnmappedSchemaId(Permanent, CopyError):
    """A record carries a schema id the migration did not map (remap, ``unknown_id_policy: fail``): no retry maps it.

    Carries where (topic, partition, offset, key or value) and the source id, so the task, which can ask the
    source registry, names the subject and version too.
    """

    def __init__(self, topic: str, partition: int, offset: int, field: str, schema_id: int):
        self.topic, self.partition, self.offset, self.field, self.schema_id = topic, partition, offset, field, schema_id
        super().__init__(f"{topic}-{partition} at offset {offset}: the {field} carries schema id {schema_id}, which "
                         "the schema migration did not map (unknown_id_policy: fail)")


def failure_record(exc: BaseException) -> dict[str, Any] | None:
    """What the copy job hands its task about a failure no retry can heal; None for one that may heal.

    Deterministic: an unmapped schema id, a record over the destination's size limit, a planned topic gone,
    an authorization or configuration refusal (``KafkaClusterError.permanent``). Everything else (timeouts,
    brokers down, a crash) keeps the task's retries, which resume exactly-once.
    """
    if isinstance(exc, UnmappedSchemaId):
        return {"message": str(exc), "topic": exc.topic, "partition": exc.partition, "offset": exc.offset,
                "field": exc.field, "schema_id": exc.schema_id, "kind": "unmapped-schema-id"}
    if isinstance(exc, KafkaClusterError) and exc.permanent:
        return {"message": str(exc), "kind": "refused"}
    if retry_cannot_help(exc):  # e.g. runner.PlannedTopicMissing: a planned topic was deleted
        return {"message": str(exc), "kind": type(exc).__name__}
    return None


class CopyFailed(Permanent, RuntimeError):
    """The copy job stopped on a failure no retry can heal; the message is the cause, with its record."""

    def __init__(self, record: dict[str, Any]):
        self.record = record
        super().__init__(record["message"])


def failure_path_for(report_path: str | Path | StoragePath) -> StoragePath:
    """Where the copy job leaves its failure record: beside the report the task reads on success."""
    path = as_path(report_path)
    return path.with_name(path.name + ".failure.json")


def write_failure(report_path: str | Path | StoragePath, record: dict[str, Any]) -> StoragePath:
    return write_text(failure_path_for(report_path), json.dumps(record, sort_keys=True))


def stored_failure(report_path: str | Path | StoragePath) -> dict[str, Any] | None:
    try:
        return json.loads(read_text(failure_path_for(report_path)))
    except (OSError, ValueError):
        return None


def first_failure(results: list[dict]) -> dict[str, Any] | None:
    """The failure row a Spark task returned instead of raising (``runner.spark_task``), if any."""
    return next((r["failure"] for r in results if "failure" in r), None)
