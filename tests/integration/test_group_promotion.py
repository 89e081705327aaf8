"""Promoting one consumer group on real brokers while a producer keeps writing to the source."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from scenarios import commit_source_group, consume_as_group, one_group_migration, provision_groups
from staged_support import PARTITIONS, Processor, Writer, one_catch_up_batch, thread_copy

from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import GROUP_STEPS, UnitPromotion
from kafka_ferry.kafka.reads import read_ranges
from kafka_ferry.promotion.commit import commit_translated_offsets
from kafka_ferry.promotion.group import GroupPromotionRefused, promote_group
from kafka_ferry.promotion.steps import in_process_final_copy
from kafka_ferry.state.staged_cutover import promoted_groups, read_promotions, save_promotion
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
            assert offsets[0] is not None
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
        assert writer.written > 0
    assert promoted_groups(store) == [group]
    # a catch-up run after the switch: the group's consumers own its offsets, the tool never commits them again
    committed = destination.group_offsets(group)
    commit_source_group(clusters, group, {(topic, 0): 25, (topic, 1): 25})
    in_process_final_copy(spec, source, destination, store)
    from kafka_ferry.state.staged_cutover import without_promoted_groups

    decisions = translate_migration(spec, source, destination, store).decisions
    commit_translated_offsets(destination, without_promoted_groups(store, decisions), strict=True)
    assert destination.group_offsets(group) == committed
    assert destination.group_offsets(f"{p}-b") == {(mirror, 0): 3, (mirror, 1): 3}


def test_consumers_switch_group_by_group_while_producers_write_and_process_every_record_once(clusters, tmp_path):
    """Staged cutover: groups A, then B, move while a producer writes to the source; each group's consumer
    runs on the source up to its stop and on the destination after; across several catch-up batches after the
    switch, each processed exactly the source stream, record by record: no loss, no duplicate."""
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "gsw", PARTITIONS, 20, {0: 0, 1: 0})
    group_a, group_b = f"{p}-g", f"{p}-b"
    commit_source_group(clusters, group_b, {(topic, 0): 0, (topic, 1): 0})
    provision_groups(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    mirror = spec.topics.rename.destination_topic(topic)
    after_switch = []

    with Writer(clusters, topic) as writer:
        on_source = {g: Processor(source, g, topic).start() for g in (group_a, group_b)}
        one_catch_up_batch(spec, source, destination, store)
        on_destination = {}
        for group in (group_a, group_b):  # A first, B later, producers writing all along
            on_source[group].stop()
            assert promote_group(spec, source, destination, store, group, f"run-{group}", thread_copy).promoted
            on_destination[group] = Processor(destination, group, mirror).start()
            for _ in range(2):  # catch-up batches keep copying what producers write to the source
                writer.wait_for_more(20)
                after_switch.append(one_catch_up_batch(spec, source, destination, store))
        assert writer.written > 0
    in_process_final_copy(spec, source, destination, store)  # producers stopped: the last records
    stream = Counter((msg.partition(), msg.value()) for msg in read_ranges(
        source, {(topic, q): (0, end) for (_, q), end in source.list_offsets([(topic, q) for q in range(PARTITIONS)])
                 .items()}))
    for group, consumer in on_destination.items():
        deadline = time.monotonic() + 120
        while len(on_source[group].processed) + len(consumer.processed) < sum(stream.values()):
            assert time.monotonic() < deadline, f"{group}: the destination consumer stopped short"
            time.sleep(0.2)
        consumer.stop()
        processed = on_source[group].processed + consumer.processed
        assert not (on_source[group].errors or consumer.errors), (on_source[group].errors, consumer.errors)
        assert on_source[group].processed and consumer.processed, group  # it really ran on both sides
        assert Counter(processed) == stream, f"{group}: processed records differ from the source stream"
    assert sum(1 for n in after_switch if n > 0) >= 3, after_switch  # several batches copied after the switches


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
