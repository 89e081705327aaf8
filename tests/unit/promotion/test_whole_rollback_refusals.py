"""A whole rollback (no *Groups*, no *Topics*) of a migration that is not promoted as a whole is refused, and its
plan (the dry run) is refused with the same message instead of an empty plan (issue 35's route matrix: the plan says
what the run would say). With a staged cutover, the message names the promoted groups and topics and the way each
goes back. The state topic is ``TopicBytes``; the clusters are never reached."""

from __future__ import annotations

import pytest
from test_group_rollback_checks import SPEC, Unreachable, operator, promote
from test_state_promotion_records import TopicBytes

from kafka_ferry.core.failures import retry_cannot_help
from kafka_ferry.core.state_records import GROUP_PROMOTION_KIND, TOPIC_KIND, TOPIC_PROMOTION_KIND
from kafka_ferry.operators.rollback import RollbackMigrationOperator
from kafka_ferry.promotion.rollback import RollbackRefused, RollbackRunner
from kafka_ferry.state.progress import save_migrated_groups


@pytest.fixture
def publish(monkeypatch) -> list:
    calls: list = []
    monkeypatch.setattr(RollbackMigrationOperator, "_publish", lambda self, context, report: calls.append(report))
    return calls


def refusal(store: TopicBytes, dry_run: bool) -> RollbackRefused:
    with pytest.raises(RollbackRefused) as refused:
        operator(store, dry_run)._execute({"params": {}}, None)
    assert retry_cannot_help(refused.value)
    return refused.value


@pytest.mark.parametrize("dry_run", [False, True], ids=["rollback", "rollback-plan"])
def test_a_migration_never_promoted_is_refused_by_the_rollback_and_by_its_plan(publish, dry_run):
    message = str(refusal(TopicBytes(), dry_run))
    assert message.startswith("migration 'demo-tenant' is not promoted: nothing to roll back"), message
    assert publish == []  # no page of an empty plan


@pytest.mark.parametrize("dry_run", [False, True], ids=["rollback", "rollback-plan"])
def test_a_staged_cutover_names_its_promoted_units_and_the_way_each_goes_back(publish, dry_run):
    store = TopicBytes()
    store.put_many(TOPIC_KIND, {t: {"destination_topic": t, "partitions": 1} for t in ("demo.a", "demo.b")})
    save_migrated_groups(store, {"g-a": ["demo.a"], "g-b": ["demo.b"]})
    promote(store, GROUP_PROMOTION_KIND, "g-a")
    groups_only = str(refusal(store, dry_run))
    assert "is not promoted as a whole" in groups_only
    assert "promoted group(s) g-a: roll them back with the form's *Groups* field (kafka-ferry rollback --groups " \
           "g-a)" in groups_only, groups_only
    assert "--topics" not in groups_only and "reset-promotion" not in groups_only

    promote(store, TOPIC_PROMOTION_KIND, "demo.a")
    both = str(refusal(store, dry_run))
    assert "promoted topic(s) demo.a: roll them back (with the groups reading them) with the form's *Topics* field " \
           "(kafka-ferry rollback --topics demo.a)" in both, both
    assert "kafka-ferry rollback --groups g-a" in both
    assert publish == []


def test_the_runner_refuses_before_any_step_reaches_a_cluster():
    runner = RollbackRunner(SPEC, Unreachable(), Unreachable(), TopicBytes(), work_dir="/nonexistent")
    with pytest.raises(RollbackRefused, match="is not promoted: nothing to roll back"):
        runner.run()
    with pytest.raises(RollbackRefused, match="is not promoted: nothing to roll back"):
        runner.check_promoted()
