"""The pre-flight's stage functions (``provision.preflight``, ``promotion.mode_checks``), which the pre-flight task
and ``kafka-ferry check`` call, on the in-memory clusters and the real state store of ``tests/fakes``: what each
refuses, in which order, and that none of them changes anything."""

from __future__ import annotations

import logging

import pytest
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore

from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import PROMOTED, StagedCutoverError, UnitPromotion
from kafka_ferry.core.provisioning.provisioning_plan import ProvisioningRefused
from kafka_ferry.core.specs.selection_check import EmptySelection
from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.core.specs.trigger_form import CATCH_UP, PROMOTE, PROMOTE_GROUPS, ROLLBACK
from kafka_ferry.kafka.errors import ClusterUnreachableError
from kafka_ferry.promotion.guard import MigrationPromotedError
from kafka_ferry.promotion.mode_checks import NothingCopiedYet, check_staged, check_state
from kafka_ferry.provision.preflight import diff_lines, plan_diff, reach, selected
from kafka_ferry.state.progress import save_migrated_groups, save_progress
from kafka_ferry.state.promotion import save_promoted
from kafka_ferry.state.staged_cutover import save_promotion

SPEC = parse_spec({"name": "m1", "tenant": "t", "source": {"connection_id": "src", "alias": "a"},
                   "destination": {"connection_id": "dst", "alias": "b"}, "topics": {"include": ["orders.*"]},
                   "groups": {"include": ["app-.*"]}})


@pytest.fixture
def clusters() -> tuple[FakeCluster, FakeCluster]:
    source, destination = FakeCluster("source"), FakeCluster("destination")
    for topic in ("orders.a", "orders.b", "audit"):
        source.create_topic(topic, 2, 1, {"cleanup.policy": "delete"})
    source.alter_group_offsets("app-1", {("orders.a", 0): 3})
    source.alter_group_offsets("other", {("audit", 0): 1})
    return source, destination


def everything(*clusters: FakeCluster) -> list:
    return [(sorted(c.topics), {g: dict(v.offsets) for g, v in c.groups.items()}, list(c.acls),
             [[list(log.records) for log in t.partitions] for t in c.topics.values()]) for c in clusters]


def test_both_clusters_are_probed_before_either_is_described(clusters):
    source, destination = clusters
    assert [i.cluster_id for i in reach(source, destination)] == ["source-id", "destination-id"]
    source.calls.clear()
    destination.reachable = False
    with pytest.raises(ClusterUnreachableError, match="Kafka connection 'destination'.*nothing was changed"):
        reach(source, destination)
    assert source.calls["describe_cluster"] == 0  # one try, before any request


def test_the_selection_names_what_the_spec_selects_and_refuses_an_empty_one(clusters):
    source, _ = clusters
    assert selected(SPEC, source) == (["orders.a", "orders.b"], ["app-1"])
    nothing = parse_spec({**SPEC.model_dump(mode="json", exclude_unset=True), "topics": {"include": ["ordres.*"]}})
    with pytest.raises(EmptySelection, match="nothing selected, nothing was changed"):
        selected(nothing, source)


def test_the_diff_is_what_provisioning_would_apply_and_reading_it_changes_nothing(clusters):
    source, destination = clusters
    store = FakeStateStore(destination, SPEC.state_topic_name)
    before = everything(source, destination)
    diff, topic_plan, group_plan = plan_diff(SPEC, source, destination, store, reach(source, destination))
    assert everything(source, destination) == before
    assert (diff["source_cluster_id"], diff["destination_cluster_id"]) == ("source-id", "destination-id")
    assert [c.split(" ")[:2] for c in diff["topics"]["changes"]] == [["create", "orders.a"], ["create", "orders.b"]]
    assert list(diff["groups"]["migrated"]) == ["app-1"] and not group_plan.refusals
    assert SPEC.state_topic_name in diff["internal_topics"]
    lines = diff_lines(diff, topic_plan)
    assert lines[0] == (logging.INFO, "pre-flight diff for m1:")
    assert (logging.INFO, "  group app-1 on orders.a") in lines


def test_a_promotion_of_nothing_copied_is_refused_naming_catch_up_and_a_rollback_reads_no_state(clusters):
    _, destination = clusters
    store = FakeStateStore(destination, SPEC.state_topic_name).created()
    with pytest.raises(NothingCopiedYet, match="nothing was copied yet .* run mode catch-up first"):
        check_state(SPEC, store, "m1.yaml", PROMOTE, rollback=False)
    assert check_state(SPEC, store, "m1.yaml", CATCH_UP, rollback=False).state == {}
    consumers = destination.calls["consumers"]
    assert check_state(SPEC, store, "m1.yaml", ROLLBACK, rollback=True).exists
    assert destination.calls["consumers"] == consumers  # the rollback modes stop at the topic's shape
    save_progress(store, [PartitionProgress("orders.a", 0, "orders.a", 3, 2, 2, 3)])
    assert check_state(SPEC, store, "m1.yaml", PROMOTE, rollback=False).state  # copied: the promotion may go on


def test_a_promoted_migration_refuses_every_mode_but_the_rollbacks_naming_the_rollback(clusters):
    _, destination = clusters
    store = FakeStateStore(destination, SPEC.state_topic_name).created()
    save_progress(store, [PartitionProgress("orders.a", 0, "orders.a", 3, 2, 2, 3)])
    save_promoted(store, {"orders.a": "orders.a"}, ["app-1"], 1000)
    for mode in (CATCH_UP, PROMOTE):
        with pytest.raises(MigrationPromotedError, match=f"mode '{mode}' is refused.*kafka-ferry rollback-plan"):
            check_state(SPEC, store, "m1.yaml", mode, rollback=False)
    assert check_state(SPEC, store, "m1.yaml", ROLLBACK, rollback=True).exists


def test_a_state_topic_of_another_shape_is_refused_in_every_mode(clusters):
    _, destination = clusters
    destination.create_topic(SPEC.state_topic_name, 3, 1, {"cleanup.policy": "compact"})
    store = FakeStateStore(destination, SPEC.state_topic_name)
    for mode, rollback in ((CATCH_UP, False), (ROLLBACK, True)):
        with pytest.raises(ProvisioningRefused, match="has 3 partition"):
            check_state(SPEC, store, "m1.yaml", mode, rollback=rollback)


def test_the_staged_modes_refuse_unknown_names_and_a_promoted_group_again_is_a_no_op(clusters):
    source, destination = clusters
    store = FakeStateStore(destination, SPEC.state_topic_name).created()
    save_migrated_groups(store, {"app-1": ["orders.a"]})
    state = store.read_all()
    with pytest.raises(StagedCutoverError, match="tyop"):
        check_staged(SPEC, source, store, PROMOTE_GROUPS, {"groups": "tyop"}, state, {})
    assert check_staged(SPEC, source, store, PROMOTE_GROUPS, {"groups": "app-1"}, state, {}) is False
    save_promotion(store, GROUP_PROMOTION_KIND, UnitPromotion("app-1", "r", steps_done=(PROMOTED,),
                                                              promoted_at_ms=5))
    assert check_staged(SPEC, source, store, PROMOTE_GROUPS, {"groups": "app-1"}, store.read_all(), {}) is True
