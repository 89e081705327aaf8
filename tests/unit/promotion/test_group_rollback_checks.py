"""A staged rollback naming groups refuses before any change: every group named (with topics or alone) is checked
by the group rollback's own ``check_group`` before the first topic or group changes, and the dry runs refuse with
the run's message instead of showing a plan the run would not follow. The clusters are the in-memory ones of
``tests/fakes`` (their authorizer answers the rights probe), the state store is the real store on the fake
destination: "no change" means no state record, no commit, no topic, no ACL and no report on either side."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND, TOPIC_KIND, TOPIC_PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import PROMOTED, UnitPromotion
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.operators.rollback import RollbackMigrationOperator
from kafka_ferry.promotion import group_rollback, topic_rollback
from kafka_ferry.promotion.rollback import RollbackRefused
from kafka_ferry.promotion.topic_rollback import TOPIC_STEPS
from kafka_ferry.state import rollback as rb
from kafka_ferry.state.progress import save_migrated_groups, save_progress
from kafka_ferry.state.staged_cutover import read_promotions, save_promotion

SPEC_PATH = Path(__file__).resolve().parents[3] / "dags" / "migrations" / "demo-tenant.yaml"
SPEC = load_spec(SPEC_PATH)
PRINCIPAL = "User:source"
TOPICS = ("demo.a", "demo.b", "demo.c")


def promote(store: FakeStateStore, kind, name: str, at: int = 1000) -> None:
    save_promotion(store, kind, UnitPromotion(name, "run-1", steps_done=(PROMOTED,), promoted_at_ms=at))


@pytest.fixture
def destination() -> FakeCluster:
    return destination_cluster()


def destination_cluster() -> FakeCluster:
    cluster = FakeCluster("destination")
    for t in TOPICS:
        cluster.create_topic(t, 1, 1, {})
    return cluster


@pytest.fixture
def source() -> FakeCluster:
    return source_cluster()


def source_cluster() -> FakeCluster:
    """The source as the migration's principal reaches it: it may read the groups (the rollback commits them)."""
    admin = FakeCluster("source")
    for t in TOPICS:
        admin.create_topic(t, 1, 1, {})
    admin.grant(*(AclEntry(PRINCIPAL, "GROUP", g, op) for g in ("g-a", "g-b", "g-c") for op in ("READ", "DESCRIBE")))
    return admin.as_principal(PRINCIPAL)


@pytest.fixture
def store(destination) -> FakeStateStore:
    return staged_store(destination)


def staged_store(destination: FakeCluster) -> FakeStateStore:
    """demo.a promoted with its reader g-a; g-b (reads demo.b, not promoted) promoted alone; g-c reads demo.c,
    which is promoted and not chosen; g-old rolled back already."""
    s = FakeStateStore(destination).created()
    s.put_many(TOPIC_KIND, {t: {"destination_topic": t, "partitions": 1} for t in TOPICS})
    save_migrated_groups(s, {"g-a": ["demo.a"], "g-b": ["demo.b"], "g-c": ["demo.c"], "g-old": ["demo.b"]})
    promote(s, TOPIC_PROMOTION_KIND, "demo.a")
    promote(s, TOPIC_PROMOTION_KIND, "demo.c")
    for g in ("g-a", "g-b", "g-c"):
        promote(s, GROUP_PROMOTION_KIND, g)
    rb.save_group_rollback(s, "g-old", {"status": rb.ROLLED_BACK, "promoted_at_ms": 900, "rolled_back_at_ms": 950,
                                        "offsets": []})
    return s


def rights(source: FakeCluster) -> list[tuple[str, ...]]:
    """The rights probes the source was asked (KIP-430 authorized operations of groups)."""
    return [r for r in source.requests if r[0] == "describe_groups"]


def test_an_unknown_group_is_refused_with_the_message_the_group_rollback_gives(store, source, destination):
    with pytest.raises(RollbackRefused) as checked:
        group_rollback.check_groups(SPEC, source, store, ["tyop"], with_topics=["demo.a"])
    with pytest.raises(RollbackRefused) as rolled:
        group_rollback.rollback_group(SPEC, source, destination, store, "tyop")
    assert str(checked.value) == str(rolled.value) == (
        "group 'tyop' of migration demo-tenant is not promoted: nothing to roll back")
    assert retry_cannot_help(checked.value) and rights(source) == []


def test_a_group_reading_a_promoted_topic_is_refused_unless_that_topic_goes_back_in_the_run(store, source):
    with pytest.raises(RollbackRefused, match=r"group 'g-c' reads promoted topic\(s\) demo.c"):
        group_rollback.check_groups(SPEC, source, store, ["g-c"], with_topics=["demo.a"])
    assert group_rollback.check_groups(SPEC, source, store, ["g-c"], with_topics=["demo.c"]) == ["g-c"]


def test_every_refused_name_is_named_at_once_and_nothing_is_written(store, source):
    before = list(store.log)
    with pytest.raises(RollbackRefused) as err:
        group_rollback.check_groups(SPEC, source, store, ["g-b", "g-c", "tyop"])
    assert "'g-c' reads promoted topic(s) demo.c" in str(err.value) and "'tyop'" in str(err.value)
    assert "'g-b'" not in str(err.value).split(":", 1)[1] and "nothing was changed" in str(err.value)
    assert store.log == before and rights(source) == []


def test_the_source_rights_are_checked_once_for_the_groups_still_to_commit(store, source):
    assert group_rollback.check_groups(SPEC, source, store, ["g-b", "g-old"]) == ["g-b"]
    assert rights(source) == [("describe_groups", "g-b")]  # once, for g-b only: g-old is rolled back already
    assert group_rollback.check_groups(SPEC, source, store, ["g-b"], rights=False) == ["g-b"]
    assert len(rights(source)) == 1


def test_a_group_whose_read_the_source_principal_lacks_is_refused_naming_the_grant(store, source):
    source.acls[:] = [e for e in source.acls if not (e.resource_name == "g-b" and e.operation == "READ")]
    with pytest.raises(Exception, match=f"grant ALLOW READ on GROUP 'g-b' for {PRINCIPAL}") as refused:
        group_rollback.check_groups(SPEC, source, store, ["g-b"])
    assert retry_cannot_help(refused.value)


def operator(store: FakeStateStore, source: FakeCluster, dry_run: bool) -> RollbackMigrationOperator:
    op = RollbackMigrationOperator(task_id="rollback", spec_path=str(SPEC_PATH), dry_run=dry_run)
    op.__dict__.update(spec=SPEC, source_cluster=source, destination_cluster=store.fake, state_store=store)
    return op


def snapshot(store: FakeStateStore, source: FakeCluster) -> tuple:
    """Everything a rollback could change: the state topic, both clusters' topics, committed groups and ACLs."""
    clusters = (source, store.fake)
    return (list(store.log), [sorted(c.topics) for c in clusters],
            [{g: dict(v.offsets) for g, v in c.groups.items()} for c in clusters], [list(c.acls) for c in clusters])


def published(work: Path) -> list[Path]:
    return sorted(p for p in work.rglob("*") if p.is_file()) if work.exists() else []


@pytest.mark.parametrize("form", [{"topics": "demo.a", "groups": "tyop"}, {"topics": "demo.a", "groups": "g-c"},
                                  {"groups": "g-b\ntyop"}])
@pytest.mark.parametrize("dry_run", [False, True])
def test_topics_or_groups_with_a_bad_group_are_refused_before_any_change(store, source, work, form, dry_run):
    before = snapshot(store, source)
    with pytest.raises(RollbackRefused, match="'tyop' of migration demo-tenant is not promoted|'g-c' reads"):
        operator(store, source, dry_run)._execute({"params": form}, None)
    assert snapshot(store, source) == before and published(work) == []


def test_topics_with_a_good_extra_group_check_it_then_roll_back_topics_then_the_group(store, source, work):
    # demo.a's rollback was killed after its reconcile step: the run resumes with its groups, nothing to copy
    rb.save_topic_rollback(store, "demo.a", {"status": "in-progress", "promoted_at_ms": 1000, "groups": ["g-a"],
                                             "steps": {s: {"summary": {}} for s in TOPIC_STEPS[:-2]}})
    start = len(store.log)
    report = operator(store, source, False)._execute({"params": {"topics": "demo.a", "groups": "g-b"}}, None)
    assert report["status"] == "rolled-back" and set(report["topics"]) == {"demo.a"} and "g-b" in report["groups"]
    written = [key.decode() for key, value in store.log[start:] if value is not None]
    order = [k for k in written if k in ("rollback/topic/demo.a", "rollback/group/g-a", "rollback/group/g-b")]
    # the topic's groups (g-a) roll back with it, the topic is marked, then the extra group
    assert order.index("rollback/group/g-a") < order.index("rollback/topic/demo.a") < order.index(
        "rollback/group/g-b") == len(order) - 1
    assert set(read_promotions(store, GROUP_PROMOTION_KIND)) == {"g-c"}  # g-a and g-b are no longer promoted
    assert ("describe_groups", "g-b") in rights(source)  # g-b's rights checked (before the topics moved)
    assert rights(source).index(("describe_groups", "g-b")) == 0
    assert published(work) != []


def test_the_topic_plan_takes_the_extra_groups_along_as_the_run_would(store, source):
    before = snapshot(store, source)
    plan = topic_rollback.topic_rollback_plan(SPEC, source, store.fake, store, ["demo.a"], ["g-a", "g-b", "g-old"])
    assert set(plan["groups"]) == {"g-a", "g-b"}  # the reader, the extra one to commit; g-old is done
    needed = "\n".join(plan["acls"]["needed"])
    assert "GROUP 'g-a'" in needed and "GROUP 'g-b'" in needed and "g-old" not in needed
    assert snapshot(store, source) == before  # a dry run changes nothing
    with pytest.raises(RollbackRefused, match="'tyop'"):
        topic_rollback.topic_rollback_plan(SPEC, source, store.fake, store, ["demo.a"], ["tyop"])


def test_the_group_plan_shows_only_groups_the_run_would_commit(store, source):
    # demo.b copied (3 records, at the same offsets), g-b committed at 2 on the destination
    save_progress(store, [PartitionProgress("demo.b", 0, "demo.b", 3, 2, 2, 3)])
    for cluster in (source, store.fake):
        cluster.produce_and_wait("demo.b", [(b"k", b"v")] * 3, partition=0)
    store.fake.alter_group_offsets("g-b", {("demo.b", 0): 2})
    before = snapshot(store, source)
    plan = group_rollback.group_rollback_plan(SPEC, source, store.fake, store, ["g-b", "g-old"])
    assert set(plan) == {"groups", "acls", "rolled_back_already"} and plan["rolled_back_already"] == ["g-old"]
    assert list(plan["groups"]) == ["g-b"]  # g-b resumes on the topic it reads, the partition it committed
    assert [(r["source_topic"], r["partition"], r["destination_offset"]) for r in plan["groups"]["g-b"]] == [
        ("demo.b", 0, 2)]
    assert [line.split(" (")[0] for line in plan["acls"]["needed"] if "GROUP" in line] == [
        f"source: ALLOW READ on GROUP 'g-b' for {PRINCIPAL}"] and plan["acls"]["missing"] == []
    assert snapshot(store, source) == before  # a dry run changes nothing
    with pytest.raises(RollbackRefused, match="'g-a' reads promoted topic"):
        group_rollback.group_rollback_plan(SPEC, source, store.fake, store, ["g-a", "g-b"])
