"""Auto-detect on real brokers: a group is offered once it has no members and its offsets stopped moving."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from scenarios import commit_source_group, one_group_migration

from kafka_ferry.dag_factory import build_migration_dag
from kafka_ferry.operators.translation import TranslateOffsetsOperator
from kafka_ferry.promotion.group_readiness import ready_groups
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


def test_catch_up_runs_save_the_ready_groups_and_the_form_offers_them(clusters, tmp_path, monkeypatch):
    """The catch-up translation looks at readiness; the next parse of the DAG offers the ready groups in the form."""
    monkeypatch.setenv("KFERRY_WORK_DIR", str(tmp_path / "work"))
    p, _topic, spec_path, spec = one_group_migration(clusters, tmp_path, "grf", 1, 10, {0: 2})
    translate = TranslateOffsetsOperator(task_id="translate_offsets", spec_path=spec_path)
    assert translate.execute({"run_id": "r1"})["ready_groups"] == []  # first look: counted as just committed
    form = build_migration_dag(spec, Path(spec_path)).params.get_param("groups")
    assert form.description is not None
    assert "examples" not in form.schema and "No group was ready at the last catch-up run" in form.description

    time.sleep(spec.promotion.quiesce_window_seconds + 0.5)  # the group's offsets stay put for the quiet window
    assert translate.execute({"run_id": "r2"})["ready_groups"] == [f"{p}-g"]
    form = build_migration_dag(spec, Path(spec_path)).params.get_param("groups")
    assert form.description is not None
    assert form.schema["examples"] == [f"{p}-g"] and "Ready at the last catch-up run" in form.description
