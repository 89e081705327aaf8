"""Who did it is recorded after every refusal (issue 42): a refused rollback of named groups or topics, a refused
staged promotion and a no-op (rolled back or promoted already) write no ``act`` record, so a refusal changes
nothing, the state topic included; a run that changes something records its act before its first change and marks
it done at the end. The tasks run through ``execute`` as the DAG runs them, on the in-memory clusters of
``tests/fakes`` (the state store is the real one on the fake destination); ``run_table``'s ``before_change`` is
checked on a small table of its own."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum

import pytest
from airflow.sdk.exceptions import AirflowFailException
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore
from test_group_rollback_checks import SPEC, SPEC_PATH, destination_cluster, snapshot, source_cluster, staged_store

from kafka_ferry.core.common.state_records import ACT_KIND, GROUP_PROMOTION_KIND
from kafka_ferry.core.cutover.authority import DONE, act_line
from kafka_ferry.core.cutover.staged_cutover import StagedCutoverError
from kafka_ferry.core.cutover.step_table import Step, StepTable
from kafka_ferry.core.specs.trigger_form import CONFIRM_FIELD
from kafka_ferry.operators.rollback import RollbackMigrationOperator
from kafka_ferry.operators.staged_promotion import PromoteGroupsOperator, PromoteTopicsOperator
from kafka_ferry.promotion.rollback import DestinationNotQuiet, RollbackRefused
from kafka_ferry.promotion.step_runner import run_table
from kafka_ferry.reports.publish import OVERVIEW_FILE
from kafka_ferry.state.staged_cutover import read_promotions

RUN_ID = "manual__2026-11-27T05:00:00+00:00"
NO_REGISTRY = SPEC.model_copy(update={"schema_registry": None})  # the task opens no registry connection here


@dataclass
class DagRun:
    """What the act reads of the run: who triggered it and how."""

    triggering_user_name: str = "alice"
    run_type: str = "manual"


def context(**form: str) -> dict:
    return {"params": {CONFIRM_FIELD: SPEC.name, **form}, "run_id": RUN_ID, "dag_run": DagRun()}


@pytest.fixture
def source() -> FakeCluster:
    return source_cluster()


@pytest.fixture
def store() -> FakeStateStore:
    """The staged cutover of ``test_group_rollback_checks``: demo.a and demo.c promoted with their readers g-a
    and g-c, g-b promoted alone, g-old rolled back already."""
    return staged_store(destination_cluster())


def acts(store: FakeStateStore) -> dict:
    return store.read_kind(ACT_KIND)


@pytest.mark.parametrize("form", [{"groups": "tyop"}, {"groups": "g-b\ntyop"}, {"topics": "tyop"},
                                  {"topics": "demo.a", "groups": "g-c"}, {"topics": "demo.b"}],
                         ids=["unknown-group", "good-and-unknown-group", "unknown-topic", "topic-and-bad-group",
                              "unpromoted-topic"])
def test_a_refused_rollback_of_named_groups_or_topics_writes_no_act(store, source, work, form):
    before = snapshot(store, source)
    with pytest.raises(AirflowFailException) as refused:  # permanent: failed once, no retry
        operator(store, source, False).execute(context(**form))
    assert isinstance(refused.value.__cause__, (RollbackRefused, StagedCutoverError)), refused.value.__cause__
    assert snapshot(store, source) == before and acts(store) == {}  # the state topic too: no act record


def test_a_group_with_members_on_the_destination_is_refused_before_the_act(store, source, work):
    store.fake.join("g-b")  # a consumer still reads g-b on the destination
    before = snapshot(store, source)
    with pytest.raises(DestinationNotQuiet, match="group g-b has .* on the destination: stop its consumers"):
        operator(store, source, False).execute(context(groups="g-b"))
    assert snapshot(store, source) == before and acts(store) == {}


def test_a_rollback_of_groups_rolled_back_already_is_a_no_op_that_records_nothing(store, source, work):
    before = snapshot(store, source)
    report = operator(store, source, False).execute(context(groups="g-old"))
    assert report["status"] == "rolled-back" and report["groups"] == {"g-old": []}
    assert snapshot(store, source) == before and acts(store) == {}


def test_a_rollback_of_a_group_records_who_did_it_before_its_first_change_then_done(store, source, work):
    start = len(store.log)
    operator(store, source, False).execute(context(groups="g-b"))
    written = [key.decode() for key, value in store.log[start:] if value is not None]
    act_key = f"act/rollback/{RUN_ID}"
    assert act_key in written, written
    assert written.index(act_key) == 0, written  # before the group's first record (its resume decision)
    statuses = [json.loads(value)["status"] for key, value in store.log[start:] if key.decode() == act_key]
    assert statuses == ["started", DONE] and written[-1] == act_key  # started, then done at the end
    act = acts(store)[f"rollback/{RUN_ID}"]
    assert (act["action"], act["user"], act["confirmation"], act["run_id"], act["groups"], act["status"]) == (
        "rollback", "alice", SPEC.name, RUN_ID, ["g-b"], DONE)
    assert "g-b" not in read_promotions(store, GROUP_PROMOTION_KIND)
    # who did it, on the Migrations page's row (the overview) and the run's page: user, confirmation, run, times
    line = act_line(act)
    assert line.startswith(f"rollback of groups g-b by 'alice', confirmed '{SPEC.name}', run {RUN_ID}, started ")
    overview = json.loads(next(work.rglob(OVERVIEW_FILE)).read_text())
    assert line in json.dumps(overview), overview
    assert any("alice" in p.read_text() for p in work.rglob("*.html")), sorted(work.rglob("*"))


def operator(store: FakeStateStore, source: FakeCluster, dry_run: bool = False) -> RollbackMigrationOperator:
    return staged(RollbackMigrationOperator, store, source, dry_run=dry_run)


def staged(cls: type, store: FakeStateStore, source: FakeCluster, **kwargs):
    op = cls(task_id=cls.__name__, spec_path=str(SPEC_PATH), **kwargs)
    op.__dict__.update(spec=NO_REGISTRY, source_cluster=source, destination_cluster=store.fake, state_store=store)
    return op


def test_a_group_promotion_refused_by_its_quiet_check_writes_no_act(store, source, work):
    # g-b rolled back (not promoted) and still consumed on the source: its first step, a read-only check, refuses
    operator(store, source, False).execute(context(groups="g-b"))
    source.join("g-b")
    before = snapshot(store, source)
    with pytest.raises(Exception, match="group g-b still has members on the source"):
        staged(PromoteGroupsOperator, store, source).execute(context(groups="g-b"))
    after = snapshot(store, source)
    assert after[1:] == before[1:]  # both clusters as they were
    # the state topic: only the readiness lines' group activity (observed, not changed), no act or promotion record
    assert {k.decode().split("/")[0] for k, _ in after[0][len(before[0]):]} <= {"group_activity"}
    assert list(acts(store)) == [f"rollback/{RUN_ID}"]  # the rollback's act only: no promote-groups act


def test_a_topic_promotion_naming_an_unknown_topic_writes_no_act(store, source, work):
    before = snapshot(store, source)
    with pytest.raises(AirflowFailException, match="tyop"):
        staged(PromoteTopicsOperator, store, source).execute(context(topics="tyop"))
    assert snapshot(store, source) == before and acts(store) == {}


# --- run_table's before_change, on a table of its own -----------------------------------------------------------
class Walk(StrEnum):
    LOOK = "look"
    CHANGE = "change"


@dataclass
class Runner:
    """Records what happened, in order; ``refuse``: the read-only step refuses."""

    refuse: bool = False
    events: list[str] = field(default_factory=list)


class Refused(Exception):
    pass


def look(runner: Runner) -> None:
    runner.events.append("look")
    if runner.refuse:
        raise Refused("not quiet")


def change(runner: Runner) -> None:
    runner.events.append("change")


def record(runner: Runner, outcome) -> None:
    runner.events.append(f"record {outcome.step}")


class Begin:
    """``before_change``: notes each call in the runner's events."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def __call__(self) -> None:
        self.runner.events.append("before_change")


TABLE: StepTable[Runner] = StepTable("walk", Walk, (Step(Walk.LOOK, look, "nothing", "t", reads_only=True),
                                                    Step(Walk.CHANGE, change, "the change", "t")), record)


def test_before_change_comes_after_a_read_only_step_and_before_the_first_record():
    runner = Runner()
    run_table(TABLE, runner, [], "walk", before_change=Begin(runner))
    assert runner.events == ["look", "before_change", "record look", "change", "record change"]


def test_a_refusing_read_only_step_never_reaches_before_change():
    runner = Runner(refuse=True)
    with pytest.raises(Refused):
        run_table(TABLE, runner, [], "walk", before_change=Begin(runner))
    assert runner.events == ["look"]


def test_a_resumed_run_calls_before_change_before_its_first_changing_step_and_a_finished_one_never():
    runner = Runner()
    run_table(TABLE, runner, ["look"], "walk", before_change=Begin(runner))
    assert runner.events == ["before_change", "change", "record change"]
    done = Runner()
    run_table(TABLE, done, ["look", "change"], "walk", before_change=Begin(done))
    assert done.events == []
