"""What a failed copy says: the first record not copied, the cause (not its consequences), what to do.

A refused record must name the source offset progress stays before, the destination's reason, the ACL to
grant when it is an authorization error and the offending record when it is too large; a failed read
names the offset and, when retention deleted it, that the batch must be planned again.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from kafka_ferry.copy.delivery import ChunkAcks
from kafka_ferry.copy.plan import PartitionTask
from kafka_ferry.kafka.errors import KafkaClusterError

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
    errors = [c.error for c in chunks if c.error is not None]
    raised = exc.__context__ if isinstance(exc, SystemError) else exc
    raised = raised.args[0] if isinstance(raised, KafkaException) else None
    causes = [e for e in errors if e.code() not in CONSEQUENCE_CODES] + [fatal, raised] + errors
    error = next((e for e in causes if e is not None), None) or exc
    first = next((c for c in chunks if c.error is not None), chunks[0] if chunks else None)
    at = (f" at source offsets {first.upstream[0]}..{chunks[-1].upstream[-1]} (not acknowledged; progress stays "
          f"before {first.upstream[0]})") if first else ""
    too_large = isinstance(error, KafkaError) and (error.code() in TOO_LARGE_CODES or TOO_LARGE_TEXT in error.str())
    if first is not None and too_large:
        at += largest_unacknowledged(source, task, first.upstream[0], chunks[-1].upstream[-1] + 1)
    return KafkaClusterError.on(destination, f"copy {task.source_topic}-{task.partition} to {task.destination_topic}-"
                                f"{task.partition}{at}", error, acl={"TOPIC": ("WRITE", task.destination_topic)})


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
