"""The ``state/`` modules of one kind each, on the real store over the in-memory cluster of ``tests/fakes``: what a
writer stores is what a reader gets, a rerun with nothing new writes nothing, a tombstone removes a record, and
reading a migration that never ran creates nothing on the destination."""

from __future__ import annotations

from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore

from kafka_ferry.core.common.state_records import TOPIC_KIND, WRITTEN_AT
from kafka_ferry.core.schemas.serialized_fields import FieldDecision
from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.state.backlog import read_backlog, run_points, save_backlog
from kafka_ferry.state.decode_marks import decode_marks, save_decode_marks
from kafka_ferry.state.fences import forget_fence, group_fence_key, recorded_fences, save_fences, topic_fence_key
from kafka_ferry.state.group_activity import group_activity, save_group_activity
from kafka_ferry.state.schema_ids import id_map_storer, record_rewriter, stored_id_map
from kafka_ferry.state.serialized_fields import fields_by_destination, store_decisions, stored_decisions
from kafka_ferry.state.time_plans import recorded_time_plans
from kafka_ferry.state.topic_ownership import mirrored_topics, owned_topics


def spec(**extra):
    return parse_spec({"name": "m1", "tenant": "t", "source": {"connection_id": "src", "alias": "a"},
                       "destination": {"connection_id": "dst", "alias": "b"}, "topics": {"include": ["orders.*"]},
                       **extra})


def unstamped(records: dict) -> dict:
    return {k: {f: v for f, v in r.items() if f != WRITTEN_AT} for k, r in records.items()}


def backlog(batch: str, finished: int, **fields) -> dict:
    return {"batch_id": batch, "finished_at_ms": finished, "duration_s": 2.0, "records_copied": 10,
            "bytes_copied": 100, "backlog_before": 30, "backlog_after": 20, "offsets_progressed": None,
            "backlog_bytes_after": 0, "bytes_estimated": False, "copy_records_per_s": 5.0, "etas": {},
            **fields}


def test_the_backlog_history_is_one_record_per_batch_oldest_first():
    store = FakeStateStore().created()
    save_backlog(store, backlog("b2", 2000))
    save_backlog(store, backlog("b1", 1000, records_copied=7))
    save_backlog(store, backlog("b1", 1000, records_copied=9))  # a retried report task rewrites its batch's record
    history = read_backlog(store)
    assert [(r["batch_id"], r["records_copied"]) for r in history] == [("b1", 9), ("b2", 10)]
    points = run_points(history)
    assert [(p.batch_id, p.records_copied, p.offsets_progressed) for p in points] == [("b1", 9, None),
                                                                                        ("b2", 10, None)]
    assert read_backlog(store, store.read_all()) == history  # from an already read state: the same


def test_decode_marks_and_group_activity_read_back_and_a_tombstone_removes_a_mark():
    store = FakeStateStore().created()
    mark = {"destination_topic": "d", "partition": 0, "checked_through": 5, "records": 5, "decoded": 5, "plain": 0,
            "failed": 0, "batch_id": "b"}
    save_decode_marks(store, {"d:0": mark, "d:1": {**mark, "partition": 1}})
    save_decode_marks(store, {"d:1": None})
    assert unstamped(decode_marks(store)) == {"d:0": mark}
    save_group_activity(store, {"g": {"fingerprint": "f1", "changed_at_ms": 10}})
    save_group_activity(store, {"g": {"fingerprint": "f2", "changed_at_ms": 20}})
    assert unstamped(group_activity(store)) == {"g": {"fingerprint": "f2", "changed_at_ms": 20}}


def test_fence_records_are_keyed_by_unit_and_forgetting_one_leaves_the_others():
    store = FakeStateStore().created()
    entry = {"principal": "User:app", "resource_type": "GROUP", "resource_name": "g", "operation": "READ"}
    save_fences(store, {group_fence_key("g"): [entry], topic_fence_key("t.mirror"): [], "GROUP:gone": None})
    assert sorted(recorded_fences(store)) == ["GROUP:g", "TOPIC:t.mirror"]
    forget_fence(store, "GROUP:g")
    assert unstamped(recorded_fences(store)) == {"TOPIC:t.mirror": {"entries": []}}
    assert recorded_fences(store, store.read_all()) == recorded_fences(store)


def test_the_schema_id_map_stores_only_what_changed_and_a_complete_rerun_writes_nothing():
    store = FakeStateStore().created()
    id_map_storer(store, "remap", "run-1")({1: 101, 2: 102})
    assert stored_id_map(store) == {1: 101, 2: 102}
    written = len(store.log)
    id_map_storer(store, "remap", "run-2")({1: 101, 2: 102})
    assert len(store.log) == written  # nothing new: nothing written
    id_map_storer(store, "remap", "run-3")({1: 101, 2: 202, 3: 103})
    assert len(store.log) == written + 2 and stored_id_map(store) == {1: 101, 2: 202, 3: 103}
    assert record_rewriter(spec(), store) is None  # no registry section: records are copied byte for byte


def test_serialized_field_decisions_store_only_changes_and_read_back_by_destination_topic():
    store = FakeStateStore().created()
    decisions = {"orders.a": FieldDecision("orders.a", False, True, "value ids seen"),
                 "orders.b": FieldDecision("orders.b", False, False, "plain")}
    assert store_decisions(store, decisions, "run-1") == 2
    assert store_decisions(store, decisions, "run-2") == 0
    assert stored_decisions(store) == decisions
    renamed = spec(topics={"include": ["orders.*"], "rename": {"policy": "prefix", "prefix": "m."}})
    assert fields_by_destination(renamed, store) == {"m.orders.a": decisions["orders.a"],
                                                     "m.orders.b": decisions["orders.b"]}


def test_reading_a_migration_that_never_ran_creates_nothing():
    destination = FakeCluster("destination")
    assert recorded_time_plans(spec(), destination) == {} and owned_topics(spec(), destination) == set()
    assert destination.topics == {}  # no state topic made by a read (a dry run changes nothing)
    store = FakeStateStore(destination, spec().state_topic_name).created()
    store.put_many(TOPIC_KIND, {"orders.a": {"destination_topic": "b.orders.a", "partitions": 2}})
    assert owned_topics(spec(), destination) == {"b.orders.a"}  # mirrored before ownership was recorded
    assert unstamped(mirrored_topics(store)) == {"orders.a": {"destination_topic": "b.orders.a", "partitions": 2}}
