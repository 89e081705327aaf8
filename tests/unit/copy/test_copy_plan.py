"""The plan file: a lossless JSON round trip, an atomic write, no secrets, and where it lives."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from kafka_ferry.copy.plan import CopyPlan, PartitionTask, work_dir
from kafka_ferry.copy.planning import UNCAPPED, build_copy_back_plan, build_plan
from kafka_ferry.core.batches.batch_planning import PartitionPosition, RetentionGap, compute_batch_id
from kafka_ferry.core.specs.spec import parse_spec

SPEC: dict[str, Any] = {
    "name": "acme-orders", "tenant": "acme", "source": {"connection_id": "kafka_src", "alias": "src"},
    "destination": {"connection_id": "kafka_dst", "alias": "dst"}, "topics": {"include": ["orders"]}}


def sample_plan() -> CopyPlan:
    return CopyPlan(
        migration="m", batch_id="batch-abc", source_cluster_id="src-id", destination_cluster_id="dst-id",
        state_topic="kafka-ferry.m.state", offset_syncs_topic="mm2-offset-syncs.dst.internal",
        provenance_headers=True, offset_sync_interval=100, max_records_per_partition=1000,
        max_bytes_per_partition=2**20,
        tasks=(PartitionTask("orders", 1, "src.orders", 10, 500), PartitionTask("orders", 0, "src.orders", 0, 7)),
        gaps=(RetentionGap("orders", 2, 0, 40),), lag_before={"orders:0": 7, "orders:1": 490, "orders:2": 0},
        planned_at_ms=1_700_000_000_000)


def test_json_round_trip_keeps_every_field(tmp_path):
    plan = sample_plan()
    path = plan.write(tmp_path / "work")
    assert path.name == "plan-batch-abc.json"
    assert CopyPlan.read(path) == plan
    assert not list(path.parent.glob("*.tmp"))


def test_summary_is_small_and_task_lookup_names_the_partition():
    plan = sample_plan()
    assert plan.summary() == {"migration": "m", "batch_id": "batch-abc", "empty": False, "partitions": 2,
                              "offsets": 497, "gaps": [{"topic": "orders", "partition": 2, "lost_start": 0,
                                                        "lost_end": 40}],
                              "deadline_ms": None, "window_closed": False}
    assert plan.task_for("orders", 0).end_offset == 7
    try:
        plan.task_for("orders", 9)
    except KeyError as exc:
        assert "orders-9 is not in batch batch-abc" in str(exc)
    else:
        raise AssertionError("no KeyError")


def test_the_plan_holds_no_client_config():
    text = sample_plan().to_json()
    assert "bootstrap" not in text and "sasl" not in text.lower()
    assert set(json.loads(text)) >= {"tasks", "gaps", "source_cluster_id", "destination_cluster_id"}


def test_work_dir_defaults_under_airflow_home_and_env_overrides():
    assert str(work_dir("m", {"AIRFLOW_HOME": "/opt/af"})) == "/opt/af/kafka-ferry/m"
    assert str(work_dir("m", {"AIRFLOW_HOME": "/opt/af", "KFERRY_WORK_DIR": "/data/kf"})) == "/data/kf/m"


def test_the_spec_copy_settings_reach_the_plan_the_copier_reads():
    """``copy.max_records_per_partition`` caps the ranges and, like the byte cap, travels in the one plan type."""
    spec = parse_spec({**SPEC, "copy": {"max_records_per_partition": 5, "max_bytes_per_partition": 1 << 20,
                                         "offset_sync_interval": 7, "provenance_headers": False}}, "acme.yaml")
    positions = [PartitionPosition("orders", 0, None, 0, 10), PartitionPosition("orders", 1, 8, 0, 9)]
    plan = build_plan(spec, positions, "src-id", "dst-id", now_ms=1)
    assert (plan.max_records_per_partition, plan.max_bytes_per_partition) == (5, 1 << 20)
    assert (plan.offset_sync_interval, plan.provenance_headers) == (7, False)
    assert [(t.source_topic, t.partition, t.start_offset, t.end_offset) for t in plan.tasks] == [
        ("orders", 0, 0, 5), ("orders", 1, 8, 9)]
    assert plan.lag_before == {"orders:0": 10, "orders:1": 1}
    assert plan.batch_id == compute_batch_id([t.as_range() for t in plan.tasks], (), 5, 1 << 20)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.batch_id = "other"  # type: ignore[misc]


def test_the_copy_back_plan_runs_the_other_way_into_its_own_state_topic():
    """A rollback's copy-back (destination -> source) is built beside the forward plan, from the same spec: its own
    state topic on the source, the source alias's sync log, provenance always on, the spec's sync interval, no cap,
    no window, no rate limit; the remap fields pass through."""
    spec = parse_spec({**SPEC, "copy": {"max_records_per_partition": 5, "offset_sync_interval": 7,
                                         "provenance_headers": False, "max_records_per_second": 10}}, "acme.yaml")
    task = PartitionTask("orders", 0, "orders", 100, 120, resume_after=99)
    plan = build_copy_back_plan(spec, [task], "dst-id", "src-id", {"schema_id_map": {"7": 1}}, now_ms=42)
    assert (plan.batch_id, plan.source_cluster_id, plan.destination_cluster_id) == ("rollback-42", "dst-id", "src-id")
    assert plan.state_topic == spec.copy_back_state_topic_name == f"{spec.state_topic_name}.rollback"
    assert plan.offset_syncs_topic == f"mm2-offset-syncs.{spec.source.alias}.internal"
    assert (plan.provenance_headers, plan.offset_sync_interval) == (True, 7)
    assert (plan.max_records_per_partition, plan.max_bytes_per_partition) == (UNCAPPED, UNCAPPED)
    assert (plan.max_records_per_second, plan.window, plan.deadline_ms) == (None, None, None)
    assert plan.tasks == (task,) and plan.schema_id_map == {"7": 1}


def test_a_remap_plan_carries_the_per_topic_fields_through_its_file(tmp_path):
    plan = dataclasses.replace(sample_plan(), schema_id_map={"1": 7}, unknown_schema_id_policy="fail",
                               serialized_fields={"orders": "value"})
    assert CopyPlan.read(plan.write(tmp_path)).serialized_fields == {"orders": "value"}
    older = json.loads(sample_plan().to_json())
    older.pop("serialized_fields")  # a plan file written before the decision existed still reads (both fields)
    assert CopyPlan.from_json(json.dumps(older)).serialized_fields is None
