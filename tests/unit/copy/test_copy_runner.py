"""Spark task groups and the lanes inside a task: every partition once, whole, balanced by offsets."""

from __future__ import annotations

import gc
import threading

from test_copy_plan import sample_plan

from kafka_ferry.copy.copier_settings import collector_paused
from kafka_ferry.copy.plan import PartitionTask
from kafka_ferry.copy.runner import _lanes, task_groups


def test_groups_cover_each_partition_once():
    plan = sample_plan()
    assert task_groups(plan, 8) == [[("orders", 1)], [("orders", 0)]]
    assert task_groups(plan, 1) == [[("orders", 1), ("orders", 0)]]


def test_lanes_hold_each_partition_once_balanced_by_offsets():
    tasks = [PartitionTask("t", p, "t", 0, size) for p, size in enumerate([100, 10, 90, 20, 5])]
    lanes = _lanes(tasks, 2)
    assert sorted(i for lane in lanes for i in lane) == [0, 1, 2, 3, 4]
    loads = [sum(tasks[i].end_offset for i in lane) for lane in lanes]
    assert max(loads) - min(loads) <= max(t.end_offset for t in tasks)
    assert _lanes(tasks, 1) == [[0, 1, 2, 3, 4]] and _lanes([], 4) == []
    assert len(_lanes(tasks, 64)) == 5  # never more lanes than partitions


def test_the_collector_stays_paused_until_the_last_lane_leaves():
    assert gc.isenabled()
    inside, release = threading.Barrier(3), threading.Event()

    def lane():
        with collector_paused():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=lane) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert not gc.isenabled()
    release.set()
    for t in threads:
        t.join()
    assert gc.isenabled()
