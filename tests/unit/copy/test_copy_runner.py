"""Spark task groups: every partition once, whole, balanced by offsets."""

from __future__ import annotations

from test_copy_plan import sample_plan

from kafka_ferry.copy.runner import task_groups


def test_groups_cover_each_partition_once():
    plan = sample_plan()
    assert task_groups(plan, 8) == [[("orders", 1)], [("orders", 0)]]
    assert task_groups(plan, 1) == [[("orders", 1), ("orders", 0)]]
