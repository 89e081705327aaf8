"""Where a first attempt's resume reads the destination's tail from: its log start, unless the task names the last
offset no record of this copy can come before (a rollback's copy-back: the source's history ends there)."""

from __future__ import annotations

import pytest

from kafka_ferry.copy import partition_copier
from kafka_ferry.copy.plan import CopyPlan, PartitionTask
from kafka_ferry.core.offset_sync_policy import PartitionSyncTracker
from kafka_ferry.core.progress import PartitionProgress


class _Cluster:
    def consumer(self, **config):
        return object()

    def producer(self, **config):
        return object()


class _Result:
    records_resumed = 0


@pytest.fixture()
def tail_reads(monkeypatch):
    """The ``after_offset`` each resume asked the destination's tail from."""
    asked: list = []
    monkeypatch.setattr(partition_copier, "copied_pairs",
                        lambda destination, topic, partition, after, source: asked.append(after) or [])
    return asked


def _resume(task: PartitionTask, progress: PartitionProgress | None) -> int:
    plan = CopyPlan(migration="m", batch_id="b", source_cluster_id="s", destination_cluster_id="d",
                    state_topic="st", offset_syncs_topic="os", provenance_headers=True, offset_sync_interval=10,
                    max_records_per_partition=10, max_bytes_per_partition=10, tasks=(task,))
    copier = partition_copier.PartitionCopier(plan, _Cluster(), _Cluster(), sync_writer=None, store=None)
    return copier._resume_from_tail(task, progress, PartitionSyncTracker(10), lambda points: None, _Result(),
                                    task.start_offset)


def test_a_first_attempt_reads_the_whole_tail_unless_the_task_knows_where_its_records_start(tail_reads):
    _resume(PartitionTask("t", 0, "t", 0, 5), None)
    _resume(PartitionTask("t", 0, "t", 0, 5, resume_after=41_999), None)  # a copy-back: history ends at 41,999
    assert tail_reads == [None, 41_999]


def test_progress_and_the_tasks_bound_the_later_of_the_two_wins(tail_reads):
    progress = PartitionProgress("t", 0, "t", next_upstream_offset=3, last_upstream_offset=2,
                                 last_downstream_offset=42_001)
    _resume(PartitionTask("t", 0, "t", 0, 5, resume_after=41_999), progress)
    _resume(PartitionTask("t", 0, "t", 0, 5, resume_after=50_000), progress)
    _resume(PartitionTask("t", 0, "t", 0, 5), progress)
    assert tail_reads == [42_001, 50_000, 42_001]


def test_a_plan_written_before_the_field_reads_back_without_it():
    task = PartitionTask("t", 0, "t", 0, 5)
    plan = CopyPlan(migration="m", batch_id="b", source_cluster_id="s", destination_cluster_id="d",
                    state_topic="st", offset_syncs_topic="os", provenance_headers=True, offset_sync_interval=10,
                    max_records_per_partition=10, max_bytes_per_partition=10, tasks=(task,))
    text = plan.to_json().replace('"resume_after": null,', "").replace(',\n    "resume_after": null', "")
    assert "resume_after" not in text
    assert CopyPlan.from_json(text).tasks == (task,)
    assert CopyPlan.from_json(CopyPlan(**{**plan.__dict__, "tasks": (PartitionTask("t", 0, "t", 0, 5, 7),)})
                              .to_json()).tasks[0].resume_after == 7
