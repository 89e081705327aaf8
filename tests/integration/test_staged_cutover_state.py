"""Staged cutover state on real brokers: promotion records round-trip, and a promoted group is never committed again."""

from __future__ import annotations

import pytest
from scenarios import commit_source_group, one_group_migration, provision_groups

from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND, TOPIC_PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import UnitPromotion
from kafka_ferry.promotion.commit import commit_translated_offsets
from kafka_ferry.promotion.steps import in_process_final_copy
from kafka_ferry.state.staged_cutover import (
    promoted_groups,
    promoted_topics,
    read_promotions,
    reset_staged_promotions,
    save_promotion,
    without_promoted_groups,
)
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import translate_migration

pytestmark = pytest.mark.integration


def test_promoted_group_is_left_to_its_consumers_by_catch_up_commits(clusters, tmp_path):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "scs", 1, 20, {0: 5})
    commit_source_group(clusters, f"{p}-h", {(topic, 0): 9})
    provision_groups(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    in_process_final_copy(spec, source, destination, store)
    promoted = UnitPromotion(f"{p}-g", "run-a", started_at_ms=1).with_step(GROUP_PROMOTION_KIND, "promoted", 2)
    save_promotion(store, GROUP_PROMOTION_KIND, promoted)
    save_promotion(store, TOPIC_PROMOTION_KIND, UnitPromotion(topic, "run-b", ("source_quiet",), 3))

    assert read_promotions(store, GROUP_PROMOTION_KIND) == {f"{p}-g": promoted}
    assert promoted_groups(store) == [f"{p}-g"] and promoted_topics(store) == []  # a started topic is not promoted

    decisions = translate_migration(spec, source, destination, store).decisions
    assert {d.group for d in decisions} == {f"{p}-h"}  # a promoted group is not translated again
    commit_translated_offsets(destination, without_promoted_groups(store, decisions), strict=True)
    [mirror] = {d.destination_topic for d in decisions}
    assert _committed(destination, f"{p}-h", mirror) == 9
    assert _committed(destination, f"{p}-g", mirror) is None  # the promoted group was not committed

    assert reset_staged_promotions(store)[GROUP_PROMOTION_KIND] == [f"{p}-g"]
    assert promoted_groups(store) == [] and read_promotions(store, TOPIC_PROMOTION_KIND) == {}


def _committed(destination, group: str, topic: str) -> int | None:
    from confluent_kafka import TopicPartition

    consumer = destination.consumer(**{"group.id": group, "enable.auto.commit": False})
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        return tp.offset if tp.offset >= 0 else None
    finally:
        consumer.close()
