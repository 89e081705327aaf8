"""The step bodies of a staged promotion (``promotion.group``, ``promotion.topic``) on the in-memory clusters of
``tests/fakes``, the state store the real one on the fake destination. The copy is the state a copy leaves: the
source log (retention moved its start to 4), the destination partition holding source offsets 4..9 at 0..5, the
offset sync and the progress record. A run resumes after its last recorded step (the final copy is recorded done,
so the copy engine given must never be called), refuses before any change, commits the exact translated offsets,
and a second run of a promoted unit writes nothing."""

from __future__ import annotations

from dataclasses import asdict
from typing import cast

import pytest
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND, TOPIC_PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import StagedCutoverError, UnitPromotion
from kafka_ferry.core.cutover.step_names import GroupStep, TopicStep
from kafka_ferry.core.offsets.groups_ahead import DestinationGroupsAhead
from kafka_ferry.core.offsets.mm2_wire import OffsetSync, offset_syncs_topic
from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.promotion.group import GroupPromotionRefused, promote_group
from kafka_ferry.promotion.readiness import check_replication_lag, replication_lag
from kafka_ferry.promotion.reconcile import ReconciliationMismatch
from kafka_ferry.promotion.topic import promote_topics
from kafka_ferry.state.fences import group_fence_key, recorded_fences, save_fences, topic_fence_key
from kafka_ferry.state.progress import save_migrated_groups, save_progress
from kafka_ferry.state.staged_cutover import read_promotions, save_promotion

SPEC = parse_spec({"name": "m1", "tenant": "t", "source": {"connection_id": "src", "alias": "a"},
                   "destination": {"connection_id": "dst", "alias": "b"}, "topics": {"include": ["orders.*"]}})
TOPIC, TS = "orders.a", 1_700_000_000_000
RECORDS = [(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(10)]
COPIED = ("source_quiet", "final_copy")  # what the resumed run finds recorded: it starts at the next step


def kafka(fake: FakeCluster) -> KafkaCluster:
    """The promotions are typed on ``KafkaCluster`` (their final copy hands its client config to the copy engine);
    the steps run here use only what the fake answers as the brokers do (``test_fakes_contract.py``)."""
    return cast(KafkaCluster, fake)


def no_copy(plan, configs) -> list[dict]:
    """The copy engine of a run whose final copy is recorded done: calling it is the bug under test."""
    raise AssertionError(f"the final copy ran again: {plan}")


class Migration:
    """Both clusters and the state after a copy of ``orders.a``-0 that began at source offset 4."""

    def __init__(self) -> None:
        self.source = FakeCluster("source")
        self.source.create_topic(TOPIC, 1, 1, {})
        self.source.produce(TOPIC, 0, *RECORDS, timestamp_ms=TS)
        self.source.truncate(TOPIC, 0, 4)
        self.store = FakeStateStore().created()
        self.destination = self.store.fake
        self.destination.create_topic(TOPIC, 1, 1, {})
        self.destination.produce(TOPIC, 0, *RECORDS[4:], timestamp_ms=TS)
        syncs = offset_syncs_topic(SPEC.destination.alias)
        self.destination.create_topic(syncs, 1, 1, {})
        sync = OffsetSync(TOPIC, 0, 4, 0)
        self.destination.produce(syncs, 0, (sync.key_bytes(), sync.value_bytes(), None), timestamp_ms=TS)
        save_progress(self.store, [PartitionProgress(TOPIC, 0, TOPIC, 10, 9, 5, 6)])
        save_migrated_groups(self.store, {"g": [TOPIC]})
        self.source.alter_group_offsets("g", {(TOPIC, 0): 7})  # its consumers stopped at source offset 7

    def recorded(self, kind, name: str, steps: tuple[str, ...]) -> None:
        save_promotion(self.store, kind, UnitPromotion(name, "run-0", steps_done=steps, started_at_ms=1))

    def fenced(self, key: str, entry: AclEntry) -> None:
        """A fence the provisioning put: its DENY on the destination and its record."""
        self.destination.grant(entry)
        save_fences(self.store, {key: [asdict(entry)]})

    def snapshot(self) -> tuple:
        clusters = (self.source, self.destination)
        return (list(self.store.log), [{g: dict(v.offsets) for g, v in c.groups.items()} for c in clusters],
                [list(c.acls) for c in clusters], [sorted(c.topics) for c in clusters])

    def group(self, **kw) -> UnitPromotion:
        return promote_group(SPEC, kafka(self.source), kafka(self.destination), self.store, "g", "run-1", no_copy, **kw)

    def topics(self, **kw) -> dict[str, UnitPromotion]:
        return promote_topics(SPEC, kafka(self.source), kafka(self.destination), self.store, [TOPIC], "run-1", no_copy,
                              quiet_window_s=0, migrated_topics=[TOPIC], **kw)


@pytest.fixture
def m() -> Migration:
    return Migration()


GROUP_FENCE = AclEntry("User:app", "GROUP", "g", "READ", permission="DENY")


def test_a_group_resumed_after_its_final_copy_commits_the_exact_translation_and_lifts_its_fence(m):
    m.recorded(GROUP_PROMOTION_KIND, "g", COPIED)
    m.fenced(group_fence_key("g"), GROUP_FENCE)
    record = m.group()
    assert record.steps_done == tuple(GroupStep)
    assert record.run_id == "run-0"  # the first run's record, resumed
    assert m.destination.group_offsets("g") == {(TOPIC, 0): 3}  # source 7 is destination 7 - 4
    assert record.detail[GroupStep.COMMITTED] == {"committed": {f"{TOPIC}:0": 3}}
    assert record.detail[GroupStep.RECONCILED] == {"partitions": 1, "ok": True}
    assert [d["downstream_offset"] for d in record.detail[GroupStep.TRANSLATED]["decisions"]] == [3]
    assert GROUP_FENCE not in m.destination.acls and recorded_fences(m.store) == {}
    assert read_promotions(m.store, GROUP_PROMOTION_KIND)["g"] == record  # stored as returned


def test_a_promoted_group_run_again_changes_nothing(m):
    m.recorded(GROUP_PROMOTION_KIND, "g", COPIED)
    first = m.group()
    m.source.alter_group_offsets("g", {(TOPIC, 0): 9})  # the source moved on: a promoted group is not translated
    before, commits = m.snapshot(), m.destination.calls["alter_group_offsets"]
    assert m.group() == first
    assert m.snapshot() == before and m.destination.calls["alter_group_offsets"] == commits


def test_a_group_with_a_member_on_the_source_is_refused_before_any_change(m):
    m.source.join("g")
    before = m.snapshot()
    with pytest.raises(GroupPromotionRefused, match="group g still has members on the source"):
        m.group()
    assert m.snapshot() == before  # no record started, nothing copied or committed
    with pytest.raises(StagedCutoverError, match=r"group 'tyop' is not part of migration m1; migrated: \['g'\]"):
        promote_group(SPEC, kafka(m.source), kafka(m.destination), m.store, "tyop", "run-1", no_copy)
    assert m.snapshot() == before


def test_a_member_back_on_the_source_after_the_translation_stops_the_commit(m):
    m.recorded(GROUP_PROMOTION_KIND, "g", (*COPIED, "translated"))
    m.source.join("g")
    with pytest.raises(GroupPromotionRefused, match="group g has members on the source again"):
        m.group()
    assert m.destination.group_offsets("g") == {}
    assert read_promotions(m.store, GROUP_PROMOTION_KIND)["g"].steps_done == (*COPIED, "translated")


def test_a_destination_group_ahead_is_refused_once_naming_the_way_out_and_kept_unless_rewind_is_allowed(m):
    m.recorded(GROUP_PROMOTION_KIND, "g", COPIED)
    m.destination.alter_group_offsets("g", {(TOPIC, 0): 5})  # its consumers already moved on the destination
    with pytest.raises(DestinationGroupsAhead) as refused:
        m.group()
    assert retry_cannot_help(refused.value) and "allow-rewind" in str(refused.value)
    assert m.destination.group_offsets("g") == {(TOPIC, 0): 5}
    assert read_promotions(m.store, GROUP_PROMOTION_KIND)["g"].steps_done == (*COPIED, "translated")
    assert m.group(allow_rewind=True).promoted  # resumes at the commit
    assert m.destination.group_offsets("g") == {(TOPIC, 0): 3}


def test_a_commit_past_the_copied_end_is_an_inexact_translation_and_nothing_is_committed(m):
    m.recorded(GROUP_PROMOTION_KIND, "g", COPIED)
    m.source.produce(TOPIC, 0, (b"k10", b"v10", None), (b"k11", b"v11", None), timestamp_ms=TS)
    m.source.alter_group_offsets("g", {(TOPIC, 0): 12})  # read records the copy has not reached
    with pytest.raises(GroupPromotionRefused, match="group g: inexact translation"):
        m.group()
    assert m.destination.group_offsets("g") == {}
    assert read_promotions(m.store, GROUP_PROMOTION_KIND)["g"].steps_done == COPIED


def test_a_copy_that_differs_from_the_source_stops_before_the_group_is_promoted(m):
    m.recorded(GROUP_PROMOTION_KIND, "g", COPIED)
    m.destination.topics[TOPIC].partitions[0].records[2] = (b"k6", b"other", TS, [("h", b"6")])
    with pytest.raises(ReconciliationMismatch):
        m.group()
    record = read_promotions(m.store, GROUP_PROMOTION_KIND)["g"]
    assert record.steps_done == (*COPIED, "translated", "committed") and not record.promoted


TOPIC_FENCE = AclEntry("User:app", "TOPIC", TOPIC, "WRITE", permission="DENY")


def test_a_topic_is_refused_while_a_migrated_group_reading_it_is_not_promoted(m):
    before = m.snapshot()
    with pytest.raises(StagedCutoverError, match="g"):
        m.topics()
    assert m.snapshot() == before


def test_a_topic_resumed_after_its_final_copy_is_reconciled_promoted_and_unfenced(m):
    m.recorded(GROUP_PROMOTION_KIND, "g", tuple(GroupStep))
    m.recorded(TOPIC_PROMOTION_KIND, TOPIC, COPIED)
    m.fenced(topic_fence_key(TOPIC), TOPIC_FENCE)
    record = m.topics()[TOPIC]
    assert record.steps_done == tuple(TopicStep) and record.run_id == "run-0"
    assert record.detail[TopicStep.RECONCILED] == {"partitions": 1, "ok": True}
    assert TOPIC_FENCE not in m.destination.acls and recorded_fences(m.store) == {}
    before = m.snapshot()
    assert m.topics() == {TOPIC: record}  # promoted: a second run writes nothing
    assert m.snapshot() == before


def test_a_waived_reader_is_named_in_the_promoted_record(m):
    m.recorded(TOPIC_PROMOTION_KIND, TOPIC, COPIED)
    record = m.topics(waived_groups=["g"])[TOPIC]
    assert record.promoted and record.detail["waived_groups"] == ["g"]


class WrittenMeanwhile(FakeCluster):
    """A source whose producer appends a record between the quiet window's two reads of the end offsets."""

    def list_offsets(self, partitions, which="latest", timestamp_ms=None, read_committed=True):
        ends = super().list_offsets(partitions, which, timestamp_ms, read_committed)
        if which == "latest" and not read_committed and not getattr(self, "wrote", False):
            self.wrote = True
            self.produce(TOPIC, 0, (b"late", b"late", None), timestamp_ms=TS)
        return ends


def test_a_topic_still_written_on_the_source_is_refused_at_its_first_step(m):
    source = WrittenMeanwhile("source")
    source.topics = m.source.topics
    m.recorded(GROUP_PROMOTION_KIND, "g", tuple(GroupStep))
    with pytest.raises(GroupPromotionRefused, match=rf"topic {TOPIC} is still written on the source .*"
                                                    rf"'{TOPIC}:0': \(10, 11\).*stop its producers first"):
        promote_topics(SPEC, kafka(source), kafka(m.destination), m.store, [TOPIC], "run-1", no_copy, quiet_window_s=0,
                       migrated_topics=[TOPIC])
    assert TOPIC not in read_promotions(m.store, TOPIC_PROMOTION_KIND)


def test_the_lag_a_sensor_waits_on_counts_what_the_copy_has_not_reached_and_names_the_worst_partition(m):
    """``promotion.readiness`` over the same copy: nothing left, then two source records past the copied end."""
    m.source.create_topic("orders.b", 2, 1, {})  # migrated, never copied: its whole log is lag
    m.source.produce("orders.b", 1, (b"b", b"b", None), timestamp_ms=TS)
    assert replication_lag(kafka(m.source), m.store, [TOPIC]) == {"max_lag": 0, "worst": f"{TOPIC}:0",
                                                                   "total_lag": 0, "partitions": 1}
    m.source.produce(TOPIC, 0, (b"k10", b"v10", None), (b"k11", b"v11", None), timestamp_ms=TS)
    assert replication_lag(kafka(m.source), m.store, [TOPIC, "orders.b"]) == {
        "max_lag": 2, "worst": f"{TOPIC}:0", "total_lag": 3, "partitions": 3}
    assert check_replication_lag(kafka(m.source), m.store, [TOPIC], max_lag=2)[0]
    assert not check_replication_lag(kafka(m.source), m.store, [TOPIC], max_lag=1)[0]
