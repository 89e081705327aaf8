"""The state topic's records: every kind declared once, literal bytes, and writes that break a declaration refused."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fakes.cluster import FakeCluster

from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.common.state_records import (
    GAP_KIND,
    KINDS,
    PROGRESS_KIND,
    STEP_PREFIX,
    TOPIC_PROMOTION_KIND,
    StateKind,
    StateRecordError,
    decode,
    gap_key,
    parse_partition_key,
    partition_key,
    under,
)
from kafka_ferry.core.cutover.staged_cutover import UnitPromotion
from kafka_ferry.state.store import MigrationStateStore

PACKAGE = Path(__file__).resolve().parents[3] / "plugins" / "kafka_ferry"


def test_a_progress_record_in_literal_bytes():
    progress = PartitionProgress("orders.v1", 3, "orders", 42, 41, 17, 40, "b-1")
    key, value = PROGRESS_KIND.encode(progress.key, progress.as_record(), written_at_ms=1_700_000_000_000)
    assert key == b"progress/orders.v1:3"
    assert value == (b'{"batch_id": "b-1", "destination_topic": "orders", "last_downstream_offset": 17, '
                     b'"last_upstream_offset": 41, "next_upstream_offset": 42, "partition": 3, "records_copied": 40, '
                     b'"source_topic": "orders.v1", "written_at_ms": 1700000000000}')
    assert decode(key, value)[:2] == ("progress", "orders.v1:3")
    record = decode(key, value)[2]
    assert record is not None
    assert PartitionProgress.from_record(record) == progress


def test_a_tombstone_is_a_null_value_under_the_same_key():
    assert GAP_KIND.encode(gap_key("t", 0, 5), None, 0) == (b"gap/t:0@5", None)
    assert decode(b"gap/t:0@5", None) == ("gap", "t:0@5", None)


def test_a_value_missing_a_declared_field_is_refused_naming_kind_key_and_field():
    record = UnitPromotion("orders", "run-1").to_record()
    del record["run_id"]
    with pytest.raises(StateRecordError, match=r"state record topic_promotion/orders: field run_id is missing"):
        TOPIC_PROMOTION_KIND.encode("orders", record, 0)


@pytest.mark.parametrize("raw", [b"progress", b"/x", b"progress/"])
def test_a_key_without_kind_and_key_is_refused(raw):
    with pytest.raises(StateRecordError, match="is not '<kind>/<key>'"):
        decode(raw, b"{}")


def test_keys_round_trip_and_prefixes_select():
    assert parse_partition_key(partition_key("a.b-1", 12)) == ("a.b-1", 12)
    state = {"step/reconcile": {"status": "done"}, "step/final_copy": {}, "migration": {}}
    assert list(under(state, STEP_PREFIX)) == ["final_copy", "reconcile"]


def test_every_kind_is_declared_once_and_named_without_a_slash():
    assert len(KINDS) == len({k.name for k in KINDS.values()}) == 22
    assert all("/" not in name and kind.name == name for name, kind in KINDS.items())


def test_no_module_but_the_declarations_names_a_kind():
    """A ``*_KIND`` constant defined anywhere else would be a second declaration a reader could disagree with."""
    elsewhere = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "state_records.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.endswith("_KIND")
                                                    for t in node.targets):
                elsewhere.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not elsewhere, f"state kinds declared outside core/common/state_records.py: {elsewhere}"


def test_the_store_refuses_an_undeclared_kind_before_writing():
    cluster = FakeCluster("destination")
    store = MigrationStateStore(cluster, "t")
    with pytest.raises(TypeError, match="'progress' is not declared"):
        # the wrong call under test: the checker refuses it too, the store must refuse it at run time as well
        store.put("progress", "t:0", {"next_upstream_offset": 1})  # type: ignore[arg-type]
    lookalike = StateKind("progress", "<topic>:<partition>", (), "a test")
    with pytest.raises(TypeError, match="is not declared"):
        store.put_many(lookalike, {"t:0": None})
    assert cluster.calls["produce_and_wait"] == 0  # refused before anything reached the cluster


def test_every_state_write_goes_to_partition_zero():
    from kafka_ferry.core.common.state_records import GROUP_KIND

    cluster = FakeCluster("destination")  # in memory (tests/fakes): a topic of 3 partitions shows where writes go
    cluster.create_topic("t", 3, 1, {"cleanup.policy": "compact"})
    MigrationStateStore(cluster, "t").put_many(GROUP_KIND, {"g1": {"source_topics": []}, "g2": None})
    assert [log.end for log in cluster.topics["t"].partitions] == [2, 0, 0]


@pytest.mark.parametrize(("partitions", "policy", "refused"), [(1, "compact", False), (4, "compact", True),
                                                               (1, "delete", True), (1, "compact,delete", True)])
def test_an_existing_state_topic_of_another_shape_is_refused(partitions, policy, refused):
    from kafka_ferry.core.provisioning.provisioning_plan import ProvisioningRefused

    cluster = FakeCluster("destination")
    cluster.create_topic("t", partitions, 1, {"cleanup.policy": policy})
    store = MigrationStateStore(cluster, "t")
    if refused:
        with pytest.raises(ProvisioningRefused, match=f"state topic t has {partitions} partition"):
            store.check_topic()
    else:
        assert store.check_topic() is True
    assert MigrationStateStore(FakeCluster("destination"), "missing").check_topic() is False
