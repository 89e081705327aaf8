"""A copy batch's plan: the one type (``CopyPlan``) and the JSON file the Spark job reads. No secrets:
client configs travel apart (``kafka.configs``). How a plan is made is ``copy.planning`` (Airflow side).

A retried Spark task re-reads the same file, so a retry re-runs the same batch. Light on purpose: the Spark
job's driver and each of its Python workers import this module.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka_ferry.core.batch_planning import PartitionRange, RetentionGap
from kafka_ferry.core.rate_limit import RateLimit
from kafka_ferry.core.state_records import partition_key
from kafka_ferry.storage.workdir import WORK_DIR_ENV, StoragePath, as_path, read_text, write_text
from kafka_ferry.storage.workdir import work_dir as work_dir

__all__ = ["WORK_DIR_ENV", "CopyPlan", "PartitionTask", "work_dir"]  # work_dir: kafka_ferry.storage.workdir's


@dataclass(frozen=True)
class PartitionTask:
    """Copy upstream offsets ``[start_offset, end_offset)`` of one source partition to the same partition."""

    source_topic: str
    partition: int
    destination_topic: str
    start_offset: int
    end_offset: int
    # The last destination offset no record of this copy can come before, when the task knows one (a rollback's
    # copy-back: the last source offset the forward copy read; it appends after the cutover): a first attempt's
    # resume reads the destination's tail from there, not from its log start (a source's whole history).
    resume_after: int | None = None

    @property
    def key(self) -> str:
        return partition_key(self.source_topic, self.partition)

    def as_range(self) -> PartitionRange:
        return PartitionRange(self.source_topic, self.partition, self.start_offset, self.end_offset)


@dataclass(frozen=True)
class CopyPlan:
    migration: str
    batch_id: str
    source_cluster_id: str
    destination_cluster_id: str
    state_topic: str
    offset_syncs_topic: str
    provenance_headers: bool
    offset_sync_interval: int
    max_records_per_partition: int
    max_bytes_per_partition: int
    tasks: tuple[PartitionTask, ...]
    gaps: tuple[RetentionGap, ...] = ()
    lag_before: dict[str, int] = field(default_factory=dict)  # partition_key -> uncopied offsets
    planned_at_ms: int = 0
    # remap-mode schema migration: source id -> destination id for the 4-byte id in wire-format keys/values
    # (JSON object keys are strings); None copies keys and values byte for byte
    schema_id_map: dict[str, int] | None = None
    unknown_schema_id_policy: str = "fail"
    # remap mode: per source topic the fields the id map applies to ("key", "value", "both", "none";
    # core.serialized_fields); the others are copied byte for byte. None (a plan written before the decision
    # existed) rewrites both, as such a plan always did.
    serialized_fields: dict[str, str] | None = None
    lanes_per_task: int = 1  # partitions a Spark task copies at once (copy.lanes_per_task; see runner.copy_group)
    # the migration's rate limit (copy.max_*_per_second), shared by the tasks by offsets (core.rate_limit)
    max_bytes_per_second: int | None = None
    max_records_per_second: int | None = None
    # copy.window: the deadline (epoch ms) every copier stops at, at a chunk boundary; None: no window
    window: str | None = None
    deadline_ms: int | None = None
    window_budget_records: int | None = None  # the offsets the window was sized for (None: no estimate yet)

    @property
    def rate_limit(self) -> RateLimit:
        return RateLimit(self.max_bytes_per_second, self.max_records_per_second)

    @property
    def window_closed(self) -> bool:
        """The deadline had passed when the batch was planned: it copies nothing."""
        return self.deadline_ms is not None and self.planned_at_ms >= self.deadline_ms

    @property
    def is_empty(self) -> bool:
        return not self.tasks

    def task_for(self, source_topic: str, partition: int) -> PartitionTask:
        for task in self.tasks:
            if (task.source_topic, task.partition) == (source_topic, partition):
                return task
        raise KeyError(f"{source_topic}-{partition} is not in batch {self.batch_id}")

    def summary(self) -> dict[str, Any]:
        """What the planning task returns through XCom: small, and no secrets."""
        return {
            "migration": self.migration,
            "batch_id": self.batch_id,
            "empty": self.is_empty,
            "partitions": len(self.tasks),
            "offsets": sum(t.end_offset - t.start_offset for t in self.tasks),
            "gaps": [asdict(g) for g in self.gaps],
            "deadline_ms": self.deadline_ms,
            "window_closed": self.window_closed,
        }

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CopyPlan:
        data = json.loads(text)
        data["tasks"] = tuple(PartitionTask(**t) for t in data["tasks"])
        data["gaps"] = tuple(RetentionGap(**g) for g in data.get("gaps", ()))
        return cls(**data)

    def write(self, directory: str | Path | StoragePath) -> StoragePath:
        """Write ``plan-<batch_id>.json`` whole (a reader never sees half a plan), locally or in object storage."""
        return write_text(as_path(directory) / f"plan-{self.batch_id}.json", self.to_json())

    @classmethod
    def read(cls, path: str | Path | StoragePath) -> CopyPlan:
        return cls.from_json(read_text(as_path(path)))

