"""Run a plan's partitions: one group per Spark task, or all of them in this process (no Spark).

``copy_group`` is what a Spark task executes: it builds its own clients from the configs the driver
passes in the task closure (executors on a standalone cluster do not inherit the driver's
environment), reads current progress once (a retried plan may be behind the state topic), and copies
its partitions one after another.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kafka_ferry
from kafka_ferry.copy.copy_failures import failure_record
from kafka_ferry.copy.faults import Faults
from kafka_ferry.copy.partition_copier import PartitionCopier
from kafka_ferry.copy.plan import CopyPlan, PartitionTask
from kafka_ferry.copy.sync_writer import OffsetSyncWriter
from kafka_ferry.copy.throttle import BatchPace
from kafka_ferry.core.batches.batch_planning import split_into_task_groups
from kafka_ferry.core.batches.batch_window import lane_order, share_deadline
from kafka_ferry.core.batches.rate_limit import share_of
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.state.progress import read_progress
from kafka_ferry.state.store import MigrationStateStore


def task_groups(plan: CopyPlan, task_count: int) -> list[list[tuple[str, int]]]:
    """Partitions per Spark task, balanced by offsets; a partition never spans two tasks."""
    groups = split_into_task_groups([t.as_range() for t in plan.tasks], task_count)
    return [[(r.topic, r.partition) for r in group] for group in groups]


class PlannedTopicMissing(Permanent, RuntimeError):
    """A topic of the plan was deleted (or shrunk) after planning: the batch copies nothing. Permanent: planning
    again is the way on, not a retry of this plan."""


def check_planned_topics(plan: CopyPlan, configs: Mapping[str, Mapping[str, Any]],
                         clusters: Mapping[str, Cluster] | None = None) -> None:
    """Before any record moves: every planned partition still exists on both clusters.

    Why before, for the whole plan: a topic deleted between plan and copy must fail the batch with its
    name, not stall a task until its timeout, and must not leave the other topics half copied.
    """
    wanted = {"source": {(t.source_topic, t.partition) for t in plan.tasks},
              "destination": {(t.destination_topic, t.partition) for t in plan.tasks}}
    missing = []
    for role, partitions in wanted.items():
        cluster = clusters[role] if clusters is not None else KafkaCluster(role, configs[role])
        metadata = cluster.list_partitions({t for t, _ in partitions})
        missing += [f"{role} {t}-{p}" for t, p in sorted(partitions) if (t, p) not in metadata]
    if missing:
        raise PlannedTopicMissing(
            f"batch {plan.batch_id}: planned partitions no longer exist: {', '.join(missing[:10])}"
            f"{' ...' if len(missing) > 10 else ''} (a topic was deleted after planning); nothing was copied. "
            "Recreate it (provisioning) or change the spec, then plan again")


def copy_group(plan: CopyPlan, tasks: Sequence[PartitionTask], configs: Mapping[str, Mapping[str, Any]],
               fault_spec: str | None = None) -> list[dict]:
    """Copy these partitions over ``plan.lanes_per_task`` lanes; returns one result dict per partition, in order.

    Why lanes: one partition at a time, a copier waits on its fetches and acknowledgements most of the time
    (the process was busy a quarter of the wall time), and a Spark task per partition would cost a Python
    worker each. A lane is a thread with its own consumer, producer, sync writer and state producer; a
    partition is copied by exactly one lane, whole, so everything that makes one partition's copy exact
    (resume from the destination tail, syncs before progress, progress last) is unchanged. Lanes are
    balanced by offsets like Spark tasks. A lane's failure fails the task once every lane has stopped;
    the retry resumes each partition from its own stored progress and destination tail.
    """
    lanes = [[tasks[i] for i in lane] for lane in _lanes(tasks, plan.lanes_per_task)]
    pace = group_pace(plan, tasks)
    if len(lanes) <= 1:
        rows_of_lanes = [_copy_lane(plan, tasks, configs, fault_spec, pace)]
    else:
        with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="copy-lane") as pool:
            futures = [pool.submit(_copy_lane, plan, lane, configs, fault_spec, pace) for lane in lanes]
            rows_of_lanes = [f.result() for f in futures]
    rows = {(r["source_topic"], r["partition"]): r for lane_rows in rows_of_lanes for r in lane_rows}
    return [rows[(t.source_topic, t.partition)] for t in tasks]


def group_pace(plan: CopyPlan, tasks: Sequence[PartitionTask]) -> BatchPace:
    """This group's share of the migration's rate limit, by offsets (``core.batches.rate_limit.share_of``: the groups of
    a batch run at once and never add up to more than the limit), and the plan's deadline; its lanes share it."""
    offsets = sum(t.end_offset - t.start_offset for t in tasks)
    total = sum(t.end_offset - t.start_offset for t in plan.tasks)
    return BatchPace(share_of(plan.rate_limit, min(offsets, total), total), plan.deadline_ms)


def _lanes(tasks: Sequence[PartitionTask], lane_count: int) -> list[list[int]]:
    """Indexes of ``tasks`` per lane, balanced by offsets (``split_into_task_groups``)."""
    index = {(t.source_topic, t.partition): i for i, t in enumerate(tasks)}
    groups = split_into_task_groups([t.as_range() for t in tasks], max(1, lane_count)) if tasks else ()
    return [sorted(index[(r.topic, r.partition)] for r in group) for group in groups]


def _copy_lane(plan: CopyPlan, tasks: Sequence[PartitionTask], configs: Mapping[str, Mapping[str, Any]],
               fault_spec: str | None = None, pace: BatchPace | None = None) -> list[dict]:
    """Copy these partitions one after another with one set of clients; under a window's deadline fewest offsets
    first, each stopping at its share of the lane's time left (``core.batches.batch_window.lane_order``,
    ``share_deadline``: why), so every partition of the lane progresses in every window, the first one included."""
    source = KafkaCluster("source", configs["source"])
    destination = KafkaCluster("destination", configs["destination"])
    # The store flushes after every put: it can keep one producer for the whole lane (progress per partition),
    # started now so its producer id is there when the first partition's progress is written.
    state_clients = KafkaCluster("destination", configs["destination"], reuse_producers=True)
    state_clients.start_durable_producer()
    store = MigrationStateStore(state_clients, plan.state_topic)
    progress = read_progress(store)
    copier = PartitionCopier(plan, source, destination, OffsetSyncWriter(destination, plan.offset_syncs_topic),
                             store, Faults(fault_spec), pace)
    results = []
    deadline_ms = copier.pace.deadline_ms
    if deadline_ms is not None:
        tasks = [tasks[i] for i in lane_order([t.end_offset - t.start_offset for t in tasks])]
    try:
        for k, task in enumerate(tasks):
            share = None if deadline_ms is None else share_deadline(copier.pace.now_ms(), deadline_ms, len(tasks) - k)
            result = copier.copy(task, progress.get((task.source_topic, task.partition)), share).as_dict()
            result["executor"] = {"pid": os.getpid(), "parent": os.getppid(), "package": kafka_ferry.__file__,
                                  "pyspark": getattr(sys.modules.get("pyspark"), "__file__", None)}
            results.append(result)
    finally:
        copier.close()
    return results


def spark_task(plan_json: str, configs: Mapping[str, Mapping[str, Any]], fault_spec: str | None,
               groups: Iterable[list[tuple[str, int]]]) -> Iterator[dict]:
    """``mapPartitions`` body: each Spark partition holds one group of (topic, partition) pairs."""
    plan = CopyPlan.from_json(plan_json)
    for group in groups:
        try:
            rows = copy_group(plan, [plan.task_for(t, p) for t, p in group], configs, fault_spec)
        except Exception as exc:
            record = failure_record(exc)
            if record is None:
                raise  # may heal: the Spark task fails, the job fails, the Airflow task retries
            # A failure no retry heals comes back as a row, not as a Python traceback inside a JVM error: the
            # driver hands it to the Airflow task, whose message it becomes.
            yield {"failure": record}
            return
        yield from rows


def copy_plan_in_process(plan: CopyPlan, configs: Mapping[str, Mapping[str, Any]],
                         fault_spec: str | None = None) -> list[dict]:
    """The whole plan in this process, one partition after another: the copy without Spark."""
    return copy_group(plan, plan.tasks, configs, fault_spec)
