"""Promoting one consumer group on real brokers while a producer keeps writing to the source."""

from __future__ import annotations

import pytest
from scenarios import commit_source_group, consume_as_group, one_group_migration, provision_groups
from staged_support import PARTITIONS, Writer, thread_copy

from kafka_ferry.core.staged_cutover import GROUP_STEPS, UnitPromotion
from kafka_ferry.core.state_records import GROUP_PROMOTION_KIND
from kafka_ferry.promotion.commit import commit_translated_offsets
from kafka_ferry.promotion.runner import in_process_final_copy
from kafka_ferry.stages.group_promotion import GroupPromotionRefused, promote_group
from kafka_ferry.stages.staged_cutover_state import promoted_groups, read_promotions, save_promotion
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import translate_migration

pytestmark = pytest.mark.integration
def test_group_promoted_while_producer_writes_resumes_exactly_and_is_left_alone_after(clusters, tmp_path):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "gpr", PARTITIONS, 30, {0: 7, 1: 19})
    commit_source_group(clusters, f"{p}-b", {(topic, 0): 3, (topic, 1): 3})
    provision_groups(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    group = f"{p}-g"

    with Writer(clusters, topic) as writer:
        record = promote_group(spec, source, destination, store, group, "run-1", thread_copy)
        assert record.promoted and record.steps_done == GROUP_STEPS and record.run_id == "run-1"
        # promoting twice changes nothing: same record, nothing rewritten
        assert promote_group(spec, source, destination, store, group, "run-2", thread_copy) == record
        # the group resumes on the destination right after its last source commit, with no gap
        mirror = next(iter(destination.group_offsets(group)))[0]
        consumed = consume_as_group(clusters, group, mirror, PARTITIONS)
        assert consumed[0][:3] == [7, 8, 9] and consumed[1][:3] == [19, 20, 21]
        for offsets in consumed.values():
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
        assert writer.written > 0
    assert promoted_groups(store) == [group]
    # a catch-up run after the switch: the group's consumers own its offsets, the tool never commits them again
    committed = destination.group_offsets(group)
    commit_source_group(clusters, group, {(topic, 0): 25, (topic, 1): 25})
    in_process_final_copy(spec, source, destination, store)
    from kafka_ferry.stages.staged_cutover_state import without_promoted_groups

    decisions = translate_migration(spec, source, destination, store).decisions
    commit_translated_offsets(destination, without_promoted_groups(store, decisions), strict=True)
    assert destination.group_offsets(group) == committed
    assert destination.group_offsets(f"{p}-b") == {(mirror, 0): 3, (mirror, 1): 3}


def test_interrupted_group_promotion_resumes_with_its_first_run(clusters, tmp_path):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "gpi", 1, 12, {0: 4})
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    group = f"{p}-g"
    started = UnitPromotion(group, "run-first", started_at_ms=1).with_step(GROUP_PROMOTION_KIND, "source_quiet", 1)
    save_promotion(store, GROUP_PROMOTION_KIND, started)  # as a run that stopped after its first step leaves it

    record = promote_group(spec, source, destination, store, group, "run-second", thread_copy)

    assert record.run_id == "run-first" and record.started_at_ms == 1 and record.promoted
    assert read_promotions(store, GROUP_PROMOTION_KIND)[group] == record
    mirror = next(iter(destination.group_offsets(group)))[0]
    assert destination.group_offsets(group) == {(mirror, 0): 4}


def test_group_with_members_on_the_source_is_refused_before_anything_changes(clusters, tmp_path):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "gpm", 1, 5, {0: 2})
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    member = source.consumer(**{"group.id": f"{p}-g", "enable.auto.commit": False})
    try:
        member.subscribe([topic])
        for _ in range(60):
            member.poll(0.5)
            if source.describe_groups([f"{p}-g"])[f"{p}-g"].is_active:
                break
        with pytest.raises(GroupPromotionRefused, match=f"group {p}-g still has members on the source"):
            promote_group(spec, source, destination, store, f"{p}-g", "run-1", thread_copy)
    finally:
        member.close()
    assert read_promotions(store, GROUP_PROMOTION_KIND) == {}
