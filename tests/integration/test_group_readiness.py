"""Auto-detect on real brokers: a group is offered once it has no members and its offsets stopped moving."""

from __future__ import annotations

import pytest
from scenarios import commit_source_group, one_group_migration

from kafka_ferry.stages.group_readiness import ready_groups
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration


def test_group_is_ready_once_its_commits_stop_for_the_quiet_window(clusters, tmp_path):
    p, topic, _spec_path, spec = one_group_migration(clusters, tmp_path, "grd", 1, 10, {0: 2})
    source = clusters.cluster("source")
    store = MigrationStateStore(clusters.cluster("destination"), spec.state_topic_name)
    group = f"{p}-g"

    [first] = ready_groups(source, store, quiet_ms=1000, now_ms=10_000)
    assert not first.ready and "committed 0 ms ago" in first.reason  # first look: counted as just committed
    [quiet] = ready_groups(source, store, quiet_ms=1000, now_ms=11_000)
    assert quiet.group == group and quiet.ready
    commit_source_group(clusters, group, {(topic, 0): 5})
    [moved] = ready_groups(source, store, quiet_ms=1000, now_ms=12_000)
    assert not moved.ready and "committed 0 ms ago" in moved.reason
    [again] = ready_groups(source, store, quiet_ms=1000, now_ms=13_500)
    assert again.ready
