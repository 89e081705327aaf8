"""The staged cutover tasks on real brokers, driven by the trigger form's params as a run passes them."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException
from scenarios import one_group_migration

from kafka_ferry.operators.staged_promotion import PromoteGroupsOperator, PromoteTopicsOperator
from kafka_ferry.state.staged_cutover import promoted_groups, promoted_topics
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration


def test_form_chosen_group_then_topic_are_promoted_by_their_tasks(clusters, tmp_path):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "stk", 1, 8, {0: 3})
    store = MigrationStateStore(clusters.cluster("destination"), spec.state_topic_name)
    topics_task = PromoteTopicsOperator(task_id="promote_topics", spec_path=spec_path, quiet_window_s=0.5)
    with pytest.raises(AirflowFailException, match=f"read by unpromoted group\\(s\\) {p}-g"):  # fails once
        topics_task.execute({"params": {"topics": [topic]}, "run_id": "r0"})

    out = PromoteGroupsOperator(task_id="promote_groups", spec_path=spec_path).execute(
        {"params": {"groups": f"{p}-g\n", "allow_rewind": False}, "run_id": "r1"})
    assert out[f"{p}-g"]["run_id"] == "r1" and promoted_groups(store) == [f"{p}-g"]
    # the run's page: the group promoted by r1, its committed offsets, the topic not started yet
    page = Path(out["run_report"]).read_text()
    for text in ("staged cutover", "<b>1 / 1</b>groups promoted", "<b>0 / 1</b>topics promoted", "not started",
                 f"<td>{3}</td>", "exact", "reconciled 1 partition(s)"):
        assert text in page, text
    with pytest.raises(AirflowFailException, match=r"groups \['nope'\] are not part of this migration"):
        PromoteGroupsOperator(task_id="promote_groups", spec_path=spec_path).execute(
            {"params": {"groups": ["nope"]}, "run_id": "r2"})

    done = topics_task.execute({"params": {"topics": [topic]}, "run_id": "r3"})
    assert done[topic]["run_id"] == "r3" and promoted_topics(store) == [topic]
    assert "<b>1 / 1</b>topics promoted" in Path(done["run_report"]).read_text()
