"""A whole rollback (no *Groups*, no *Topics*) of a migration that is not promoted as a whole is refused, and its
plan (the dry run) is refused with the same message instead of an empty plan (issue 35's route matrix: the plan says
what the run would say). With a staged cutover, the message names the promoted groups and topics and the way each
goes back. The clusters are the in-memory ones of ``tests/fakes``, the state store the real one on them: a refusal
leaves both as they were and publishes no page."""

from __future__ import annotations

import pytest
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore
from test_group_rollback_checks import SPEC, operator, promote, published, snapshot
from test_topic_rollback_steps import kafka

from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND, TOPIC_KIND, TOPIC_PROMOTION_KIND
from kafka_ferry.promotion.rollback import RollbackRefused, RollbackRunner
from kafka_ferry.state.progress import save_migrated_groups


def refusal(store: FakeStateStore, dry_run: bool) -> RollbackRefused:
    source = FakeCluster("source")
    before = snapshot(store, source)
    with pytest.raises(RollbackRefused) as refused:
        operator(store, source, dry_run)._execute({"params": {}}, None)
    assert retry_cannot_help(refused.value)
    assert snapshot(store, source) == before  # refused before any change
    return refused.value


@pytest.mark.parametrize("dry_run", [False, True], ids=["rollback", "rollback-plan"])
def test_a_migration_never_promoted_is_refused_by_the_rollback_and_by_its_plan(work, dry_run):
    message = str(refusal(FakeStateStore().created(), dry_run))
    assert message.startswith("migration 'demo-tenant' is not promoted: nothing to roll back"), message
    assert published(work) == []  # no page of an empty plan


@pytest.mark.parametrize("dry_run", [False, True], ids=["rollback", "rollback-plan"])
def test_a_staged_cutover_names_its_promoted_units_and_the_way_each_goes_back(work, dry_run):
    store = FakeStateStore().created()
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
    assert published(work) == []


def test_the_runner_refuses_before_any_step_reaches_a_cluster():
    source, store = FakeCluster("source"), FakeStateStore()
    runner = RollbackRunner(SPEC, kafka(source), kafka(store.fake), store, work_dir="/nonexistent")
    with pytest.raises(RollbackRefused, match="is not promoted: nothing to roll back"):
        runner.run()
    with pytest.raises(RollbackRefused, match="is not promoted: nothing to roll back"):
        runner.check_promoted()
    # only the state topic was looked at (its end offset, to find it empty): no topic, group, ACL or write
    assert source.calls == {} and source.requests == [] and store.fake.topics == {} and store.fake.groups == {}
