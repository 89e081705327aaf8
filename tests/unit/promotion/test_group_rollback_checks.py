"""A staged rollback naming groups refuses before any change: every group named (with topics or alone) is checked
by the group rollback's own ``check_group`` before the first topic or group changes, and the dry runs refuse with
the run's message instead of showing a plan the run would not follow. The state topic is ``TopicBytes`` (the store's
encoding minus Kafka); the clusters are never reached: the steps that change them are replaced by recorders."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_state_promotion_records import TopicBytes

from kafka_ferry.core.failures import retry_cannot_help
from kafka_ferry.core.spec import load_spec
from kafka_ferry.core.staged_cutover import PROMOTED, UnitPromotion
from kafka_ferry.core.state_records import GROUP_PROMOTION_KIND, TOPIC_KIND, TOPIC_PROMOTION_KIND
from kafka_ferry.operators import rollback as operator_module
from kafka_ferry.operators.rollback import RollbackMigrationOperator
from kafka_ferry.promotion import group_rollback, topic_rollback
from kafka_ferry.promotion.rollback import RollbackRefused
from kafka_ferry.state import rollback as rb
from kafka_ferry.state.progress import save_migrated_groups
from kafka_ferry.state.staged_cutover import save_promotion

SPEC_PATH = Path(__file__).resolve().parents[3] / "dags" / "migrations" / "demo-tenant.yaml"
SPEC = load_spec(SPEC_PATH)


class Unreachable:
    """A cluster no check may touch: the checks read the state topic only (rights are recorded, not probed)."""

    principal = "User:source"

    def __getattr__(self, name):
        raise AssertionError(f"a check reached the cluster ({name})")


def promote(store: TopicBytes, kind, name: str, at: int = 1000) -> None:
    save_promotion(store, kind, UnitPromotion(name, "run-1", steps_done=(PROMOTED,), promoted_at_ms=at))


@pytest.fixture
def store() -> TopicBytes:
    """demo.a promoted with its reader g-a; g-b (reads demo.b, not promoted) promoted alone; g-c reads demo.c,
    which is promoted and not chosen; g-old rolled back already."""
    s = TopicBytes()
    s.put_many(TOPIC_KIND, {t: {"destination_topic": t, "partitions": 1} for t in ("demo.a", "demo.b", "demo.c")})
    save_migrated_groups(s, {"g-a": ["demo.a"], "g-b": ["demo.b"], "g-c": ["demo.c"], "g-old": ["demo.b"]})
    promote(s, TOPIC_PROMOTION_KIND, "demo.a")
    promote(s, TOPIC_PROMOTION_KIND, "demo.c")
    for g in ("g-a", "g-b", "g-c"):
        promote(s, GROUP_PROMOTION_KIND, g)
    rb.save_group_rollback(s, "g-old", {"status": rb.ROLLED_BACK, "promoted_at_ms": 900, "rolled_back_at_ms": 950,
                                        "offsets": []})
    return s


@pytest.fixture
def rights(monkeypatch) -> list:
    calls: list = []
    monkeypatch.setattr(group_rollback, "check_rollback_rights", lambda spec, source, what, topics, groups:
                        calls.append((what, list(topics), list(groups))))
    return calls


def test_an_unknown_group_is_refused_with_the_message_the_group_rollback_gives(store, rights):
    with pytest.raises(RollbackRefused) as checked:
        group_rollback.check_groups(SPEC, Unreachable(), store, ["tyop"], with_topics=["demo.a"])
    with pytest.raises(RollbackRefused) as rolled:
        group_rollback.rollback_group(SPEC, Unreachable(), Unreachable(), store, "tyop")
    assert str(checked.value) == str(rolled.value) == (
        "group 'tyop' of migration demo-tenant is not promoted: nothing to roll back")
    assert retry_cannot_help(checked.value) and rights == []


def test_a_group_reading_a_promoted_topic_is_refused_unless_that_topic_goes_back_in_the_run(store, rights):
    with pytest.raises(RollbackRefused, match=r"group 'g-c' reads promoted topic\(s\) demo.c"):
        group_rollback.check_groups(SPEC, Unreachable(), store, ["g-c"], with_topics=["demo.a"])
    assert group_rollback.check_groups(SPEC, Unreachable(), store, ["g-c"], with_topics=["demo.c"]) == ["g-c"]


def test_every_refused_name_is_named_at_once_and_nothing_is_written(store, rights):
    before = list(store.log)
    with pytest.raises(RollbackRefused) as err:
        group_rollback.check_groups(SPEC, Unreachable(), store, ["g-b", "g-c", "tyop"])
    assert "'g-c' reads promoted topic(s) demo.c" in str(err.value) and "'tyop'" in str(err.value)
    assert "'g-b'" not in str(err.value).split(":", 1)[1] and "nothing was changed" in str(err.value)
    assert store.log == before and rights == []


def test_the_source_rights_are_checked_once_for_the_groups_still_to_commit(store, rights):
    assert group_rollback.check_groups(SPEC, Unreachable(), store, ["g-b", "g-old"]) == ["g-b"]
    assert rights == [("rollback of group(s) g-b", [], ["g-b"])]
    assert group_rollback.check_groups(SPEC, Unreachable(), store, ["g-b"], rights=False) == ["g-b"]
    assert len(rights) == 1


def operator(store: TopicBytes, dry_run: bool) -> RollbackMigrationOperator:
    op = RollbackMigrationOperator(task_id="rollback", spec_path=str(SPEC_PATH), dry_run=dry_run)
    op.__dict__.update(spec=SPEC, source_cluster=Unreachable(), destination_cluster=Unreachable(), state_store=store)
    return op


@pytest.fixture
def changes(monkeypatch) -> list:
    """What the operator asked to change (topic and group rollbacks) or publish."""
    calls: list = []
    monkeypatch.setattr(operator_module, "RollbackRunner", lambda *a, **k: None)
    monkeypatch.setattr(operator_module, "rollback_topics", lambda *a, **k: calls.append(("topics", a[4])) or {})
    monkeypatch.setattr(operator_module, "rollback_group", lambda *a, **k: calls.append(("group", a[4])) or {})
    monkeypatch.setattr(RollbackMigrationOperator, "_publish", lambda self, context, report: calls.append("publish"))
    return calls


@pytest.mark.parametrize("form", [{"topics": "demo.a", "groups": "tyop"}, {"topics": "demo.a", "groups": "g-c"},
                                  {"groups": "g-b\ntyop"}])
@pytest.mark.parametrize("dry_run", [False, True])
def test_topics_or_groups_with_a_bad_group_are_refused_before_any_change(store, rights, changes, form, dry_run):
    before = list(store.log)
    with pytest.raises(RollbackRefused, match="'tyop' of migration demo-tenant is not promoted|'g-c' reads"):
        operator(store, dry_run)._execute({"params": form}, None)
    assert changes == [] and store.log == before


def test_topics_with_a_good_extra_group_check_it_then_roll_back_topics_then_the_group(store, rights, changes):
    operator(store, False)._execute({"params": {"topics": "demo.a", "groups": "g-b"}}, None)
    assert changes == [("topics", ["demo.a"]), ("group", "g-b"), "publish"]
    assert ("rollback of group(s) g-b", [], ["g-b"]) in rights


def test_the_topic_plan_takes_the_extra_groups_along_as_the_run_would(store, rights, monkeypatch):
    scopes = []

    class Scope:
        def __init__(self, spec, source, destination, store, topics, groups, **kwargs):
            scopes.append((topics, groups))
            self.groups = groups

        def plan(self):
            return {"copy_back": [], "records": 0, "groups": {g: [] for g in self.groups},
                    "acls": {"needed": self.groups}}

    monkeypatch.setattr(topic_rollback, "TopicScope", Scope)
    plan = topic_rollback.topic_rollback_plan(SPEC, Unreachable(), Unreachable(), store, ["demo.a"],
                                              ["g-a", "g-b", "g-old"])
    assert scopes == [(["demo.a"], ["g-a", "g-b"])]  # the reader, the extra one to commit; g-old is done
    assert set(plan["groups"]) == {"g-a", "g-b"} and plan["acls"] == {"needed": ["g-a", "g-b"]}
    with pytest.raises(RollbackRefused, match="'tyop'"):
        topic_rollback.topic_rollback_plan(SPEC, Unreachable(), Unreachable(), store, ["demo.a"], ["tyop"])


def test_the_group_plan_shows_only_groups_the_run_would_commit(store, monkeypatch):
    monkeypatch.setattr(group_rollback, "load_partition_copies", lambda *a: {})
    # the stand-in takes exactly the real one's parameters: a call missing the destination store fails here too
    monkeypatch.setattr(group_rollback, "copied_back", lambda spec, source, store, state=None: {})
    monkeypatch.setattr(group_rollback, "group_resumes", lambda destination, g, topics, f, r: [{"reads": topics}])
    monkeypatch.setattr(group_rollback, "plan_acls", lambda spec, source, topics, groups: {"needed": list(groups)})
    plan = group_rollback.group_rollback_plan(SPEC, Unreachable(), Unreachable(), store, ["g-b", "g-old"])
    assert plan == {"groups": {"g-b": [{"reads": ["demo.b"]}]}, "acls": {"needed": ["g-b"]},
                    "rolled_back_already": ["g-old"]}
    with pytest.raises(RollbackRefused, match="'g-a' reads promoted topic"):
        group_rollback.group_rollback_plan(SPEC, Unreachable(), Unreachable(), store, ["g-a", "g-b"])
