"""Where a first attempt's resume reads the destination's tail from: its log start, unless the task names the last
offset no record of this copy can come before (a rollback's copy-back: the source's history ends there).

The destination is the in-memory cluster of ``tests/fakes``: its partition t-0 holds ten records an earlier attempt
copied from source ``s`` (upstream 100 + d at downstream d, provenance headers on each), so where the resume read
from shows in how many of them it found."""

from __future__ import annotations

import pytest
from fakes.cluster import FakeCluster

from kafka_ferry.copy import partition_copier
from kafka_ferry.copy.plan import CopyPlan, PartitionTask
from kafka_ferry.copy.sync_writer import OffsetSyncWriter
from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.offsets.offset_sync_policy import PartitionSyncTracker
from kafka_ferry.core.offsets.provenance import provenance_headers
from kafka_ferry.state.store import MigrationStateStore

COPIED = 10  # records at downstream 0..9


class _Result:
    records_resumed = 0


@pytest.fixture()
def clusters() -> tuple[FakeCluster, FakeCluster]:
    source, destination = FakeCluster("source"), FakeCluster("destination")
    source.create_topic("t", 1, 1, {})
    destination.create_topic("t", 1, 1, {})
    destination.produce("t", 0, *((b"k", b"v", provenance_headers("s", 100 + d)) for d in range(COPIED)))
    return source, destination


def _resume(clusters, task: PartitionTask, progress: PartitionProgress | None) -> tuple[int, int]:
    """(records the resume found copied, the upstream offset it resumes the copy at)."""
    plan = CopyPlan(migration="m", batch_id="b", source_cluster_id="s", destination_cluster_id="d",
                    state_topic="st", offset_syncs_topic="os", provenance_headers=True, offset_sync_interval=10,
                    max_records_per_partition=10, max_bytes_per_partition=10, tasks=(task,))
    source, destination = clusters
    # the syncs and the state go to the destination (a resume writes neither)
    writer, store = OffsetSyncWriter(destination, "os"), MigrationStateStore(destination, "st")
    copier = partition_copier.PartitionCopier(plan, source, destination, sync_writer=writer, store=store)
    result = _Result()
    start = copier._resume_from_tail(task, progress, PartitionSyncTracker(10), lambda points: None, result,
                                     task.start_offset)
    return result.records_resumed, start


def test_a_first_attempt_reads_the_whole_tail_unless_the_task_knows_where_its_records_start(clusters):
    whole = _resume(clusters, PartitionTask("t", 0, "t", 0, 5), None)
    bounded = _resume(clusters, PartitionTask("t", 0, "t", 0, 5, resume_after=3), None)  # a copy-back's bound
    assert whole == (COPIED, 110) and bounded == (COPIED - 4, 110)  # read after None (all), after 3 (4..9)


def test_progress_and_the_tasks_bound_the_later_of_the_two_wins(clusters):
    progress = PartitionProgress("t", 0, "t", next_upstream_offset=106, last_upstream_offset=105,
                                 last_downstream_offset=5)
    found = [_resume(clusters, PartitionTask("t", 0, "t", 0, 5, resume_after=3), progress)[0],
             _resume(clusters, PartitionTask("t", 0, "t", 0, 5, resume_after=7), progress)[0],
             _resume(clusters, PartitionTask("t", 0, "t", 0, 5), progress)[0]]
    assert found == [4, 2, 4]  # read after 5 (progress), after 7 (the task), after 5


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
