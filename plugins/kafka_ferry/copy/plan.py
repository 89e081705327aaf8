"""A copy batch's plan: the one type (``CopyPlan``) and the JSON file the Spark job reads. No secrets:
client configs travel apart (``kafka.configs``). How a plan is made is ``copy.planning`` (Airflow side).

A retried Spark task re-reads the same file, so a retry re-runs the same batch. Light on purpose: the Spark
job's driver and each of its Python workers import this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka_ferry.core.batches.batch_planning import PartitionRange, RetentionGap
from kafka_ferry.core.batches.rate_limit import RateLimit
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.common.state_records import partition_key
from kafka_ferry.core.schemas.schema_wire import UnknownIdPolicy
from kafka_ferry.storage.workdir import WORK_DIR_ENV, StoragePath, as_path, read_text, write_text
from kafka_ferry.storage.workdir import work_dir as work_dir

__all__ = ["WORK_DIR_ENV", "BatchFileRefused", "CopyPlan", "PartitionTask", "batch_files", "planned_files",
           "work_dir"]  # work_dir: kafka_ferry.storage.workdir's

# core.batches.batch_planning.compute_batch_id: "batch-" and 20 hex digits; nothing else names a batch's files
BATCH_ID = re.compile(r"batch-[0-9a-f]{20}")


class BatchFileRefused(Permanent, ValueError):
    """A batch id or file path handed between tasks (XCom) that is not the one the spec and the run derive."""


def batch_files(migration: str, batch_id: object) -> tuple[StoragePath, StoragePath]:
    """The plan and report files of one batch: ``<work dir of the migration>/plan-<batch id>.json`` and
    ``report-<batch id>.json``, derived from the spec's name, the configured work dir (and its connection) and
    the batch id, never taken from XCom (issue 36: whoever could edit a task's XCom could make the copy delete and
    write files anywhere, or open another tenant's object-store connection)."""
    if not isinstance(batch_id, str) or not BATCH_ID.fullmatch(batch_id):
        raise BatchFileRefused(f"batch id {str(batch_id)[:80]!r} of migration {migration!r} is not one the planner "
                               "makes ('batch-' and 20 hex digits): refused, no file is read, written or deleted")
    directory = work_dir(migration)
    return directory / f"plan-{batch_id}.json", directory / f"report-{batch_id}.json"


def planned_files(migration: str, summary: Mapping[str, Any]) -> tuple[StoragePath, StoragePath]:
    """The batch files of a planning task's summary (its XCom), derived by ``batch_files``; a summary that names
    other paths (``plan_path``, ``report_path``: kept for people reading XCom) is refused, naming them."""
    plan, report = batch_files(migration, summary.get("batch_id"))
    for key, derived in (("plan_path", plan), ("report_path", report)):
        given = summary.get(key)
        if given is not None and str(given) != str(derived):
            raise BatchFileRefused(f"the planning summary's {key} {str(given)[:300]!r} is not batch "
                                   f"{summary.get('batch_id')}'s file {derived} (derived from the spec and the "
                                   "work dir): refused, no file is read, written or deleted; the summary was "
                                   "changed after planning (XCom): clear the run's plan_copy task to plan again")
    return plan, report


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
    unknown_schema_id_policy: UnknownIdPolicy = "fail"
    # remap mode: per source topic the fields the id map applies to ("key", "value", "both", "none";
    # core.schemas.serialized_fields); the others are copied byte for byte. None (a plan written before the decision
    # existed) rewrites both, as such a plan always did.
    serialized_fields: dict[str, str] | None = None
    lanes_per_task: int = 1  # partitions a Spark task copies at once (copy.lanes_per_task; see runner.copy_group)
    # the migration's rate limit (copy.max_*_per_second), shared by the tasks by offsets (core.batches.rate_limit)
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

    def write_for(self, migration: str) -> tuple[StoragePath, StoragePath]:
        """Write the plan where ``batch_files`` derives it; returns (plan file, report file)."""
        plan, report = batch_files(migration, self.batch_id)
        write_text(plan, self.to_json())
        return plan, report

    @classmethod
    def read(cls, path: str | Path | StoragePath) -> CopyPlan:
        return cls.from_json(read_text(as_path(path)))

