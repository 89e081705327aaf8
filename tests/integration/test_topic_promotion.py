"""Promoting topics on real brokers: refused while a reading group is unpromoted, then copy batches leave them out."""

from __future__ import annotations

import pytest
from scenarios import commit_source_group, one_group_migration, provision_groups, seed_plain
from staged_support import Writer, thread_copy

from kafka_ferry.copy.planning import plan_copy
from kafka_ferry.core.common.state_records import TOPIC_PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import TOPIC_STEPS, StagedCutoverError
from kafka_ferry.promotion.group import GroupPromotionRefused, promote_group
from kafka_ferry.promotion.topic import promote_topics
from kafka_ferry.state.staged_cutover import promoted_topics, read_promotions
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration


def test_topic_promotion_waits_for_its_readers_then_stops_copy_batches(clusters, tmp_path):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "tpr", 2, 10, {0: 3, 1: 4})
    commit_source_group(clusters, f"{p}-b", {(topic, 0): 1})
    provision_groups(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)

    with pytest.raises(StagedCutoverError, match=f"topic {topic} is read by unpromoted group\\(s\\) {p}-b, {p}-g"):
        promote_topics(spec, source, destination, store, [topic], "run-t", thread_copy, quiet_window_s=0.5)
    promote_group(spec, source, destination, store, f"{p}-g", "run-g", thread_copy)
    with pytest.raises(StagedCutoverError, match=f"read by unpromoted group\\(s\\) {p}-b\\."):
        promote_topics(spec, source, destination, store, [topic], "run-t", thread_copy, quiet_window_s=0.5)
    assert read_promotions(store, TOPIC_PROMOTION_KIND) == {}  # refused before anything changed

    with Writer(clusters, topic), pytest.raises(GroupPromotionRefused, match=f"topic {topic} is still written"):
        promote_topics(spec, source, destination, store, [topic], "run-t", thread_copy, waived_groups=[f"{p}-b"],
                       quiet_window_s=1.0)
    assert read_promotions(store, TOPIC_PROMOTION_KIND) == {}  # a refused first step records nothing
    done = promote_topics(spec, source, destination, store, [topic], "run-t2", thread_copy,
                          waived_groups=[f"{p}-b"], quiet_window_s=1.0)

    record = done[topic]
    assert record.steps_done == TOPIC_STEPS and record.run_id == "run-t2"
    reconciled = record.detail["reconciled"]
    assert record.detail["waived_groups"] == [f"{p}-b"] and isinstance(reconciled, dict) and reconciled["ok"]
    assert promoted_topics(store) == [topic]
    assert promote_topics(spec, source, destination, store, [topic], "run-t3", thread_copy,
                          waived_groups=[f"{p}-b"], quiet_window_s=0.1) == done  # twice changes nothing
    seed_plain(clusters, topic, 2, 3)  # a stray late write on the source
    assert [t for t in plan_copy(spec, source, destination, store).tasks if t.source_topic == topic] == []
