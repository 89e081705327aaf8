"""The step bodies of a topic's rollback after its copy-back (``promotion.topic_rollback``: reconcile, groups,
mark_rolled_back), and of the whole migration's (``promotion.rollback``: commit_offsets, fences, reconcile,
mark_rolled_back), on the in-memory clusters of ``tests/fakes``, the state stores the real ones on them. The state is
the one a forward copy, a promotion and a copy-back leave: source offsets 4..9 copied to destination 0..5, three
records produced on the destination after the promotion (6..8) copied back to source offsets 10..12 with the
destination's provenance, the copy-back's progress and sync on the source. A killed run resumes after its recorded
copy-back (the copy-back itself needs the brokers), the reading group resumes at the exact source offset, a copy that
differs stops the run before any group is committed, and a second run changes nothing."""

from __future__ import annotations

from typing import cast

import pytest
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore

from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND, TOPIC_KIND, TOPIC_PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import PROMOTED, UnitPromotion
from kafka_ferry.core.offsets.mm2_wire import OffsetSync, offset_syncs_topic
from kafka_ferry.core.offsets.provenance import provenance_headers
from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.promotion.rollback import RollbackMismatch, RollbackRunner
from kafka_ferry.promotion.topic_rollback import rollback_topics
from kafka_ferry.state import rollback as rb
from kafka_ferry.state.progress import save_migrated_groups, save_progress
from kafka_ferry.state.promotion import promotion_status, save_promoted
from kafka_ferry.state.staged_cutover import read_promotions, save_promotion

SPEC = parse_spec({"name": "m1", "tenant": "t", "source": {"connection_id": "src", "alias": "a"},
                   "destination": {"connection_id": "dst", "alias": "b"}, "topics": {"include": ["orders.*"]}})
TOPIC, TS, PROMOTED_AT = "orders.a", 1_700_000_000_000, 5000
FORWARD = [(b"k%d" % i, b"v%d" % i, None) for i in range(10)]
AFTER = [(b"new%d" % i, b"n%d" % i, [("app", b"%d" % i)]) for i in range(3)]  # produced on the destination


def kafka(fake: FakeCluster) -> KafkaCluster:
    """The rollback is typed on ``KafkaCluster``; the steps run here use only what the fake answers as the brokers
    do (``test_fakes_contract.py``)."""
    return cast(KafkaCluster, fake)


class CopiedBack:
    """Both clusters and both state stores after the topic's copy-back, its rollback recorded up to it; ``whole``:
    the migration was promoted (and is rolled back) as a whole, not the topic alone."""

    def __init__(self, whole: bool = False) -> None:
        self.source = FakeCluster("source")
        self.source.create_topic(TOPIC, 1, 1, {})
        self.source.produce(TOPIC, 0, *FORWARD, timestamp_ms=TS)
        self.source.truncate(TOPIC, 0, 4)
        self.store = FakeStateStore(topic=f"kafka-ferry.{SPEC.name}.state").created()
        self.destination = self.store.fake
        self.destination.create_topic(TOPIC, 1, 1, {})
        self.destination.produce(TOPIC, 0, *[(k, v, provenance_headers("source-id", 4 + i))
                                             for i, (k, v, _) in enumerate(FORWARD[4:])], timestamp_ms=TS)
        self.destination.produce(TOPIC, 0, *AFTER, timestamp_ms=TS + 1)
        self.sync(self.destination, offset_syncs_topic(SPEC.destination.alias), OffsetSync(TOPIC, 0, 4, 0))
        save_progress(self.store, [PartitionProgress(TOPIC, 0, TOPIC, 10, 9, 5, 6)])
        self.store.put_many(TOPIC_KIND, {TOPIC: {"destination_topic": TOPIC, "partitions": 1}})
        save_migrated_groups(self.store, {"g": [TOPIC]})
        if whole:
            save_promoted(self.store, {TOPIC: TOPIC}, ["g"], PROMOTED_AT)
        for kind, name in ((TOPIC_PROMOTION_KIND, TOPIC), (GROUP_PROMOTION_KIND, "g")) if not whole else ():
            save_promotion(self.store, kind, UnitPromotion(name, "run-0", steps_done=(PROMOTED,),
                                                           promoted_at_ms=PROMOTED_AT))
        self.destination.alter_group_offsets("g", {(TOPIC, 0): 8})  # read 2 of the 3 records written after
        # the copy-back: destination 6..8 -> source 10..12, stamped with the destination's provenance
        self.source.produce(TOPIC, 0, *[(k, v, [*(h or []), *provenance_headers("destination-id", 6 + i)])
                                        for i, (k, v, h) in enumerate(AFTER)], timestamp_ms=TS + 1)
        self.sync(self.source, offset_syncs_topic(SPEC.source.alias), OffsetSync(TOPIC, 0, 6, 10))
        back = rb.copy_back_store(SPEC, self.source)
        back.ensure_topic()
        save_progress(back, [PartitionProgress(TOPIC, 0, TOPIC, 9, 8, 12, 3)])
        summaries: dict[str, dict[str, object]] = {"quiesce": {"partitions": 1, "groups": ["g"]},
                                                   "copy_back": {"partitions": 1, "records_copied": 3}}
        steps = {step: {"duration_s": 0.1, "summary": summary} for step, summary in summaries.items()}
        if whole:
            for step, summary in summaries.items():
                rb.save_step(self.store, step, PROMOTED_AT, summary, PROMOTED_AT + 1)
        else:
            rb.save_topic_rollback(self.store, TOPIC, {"status": "in-progress", "promoted_at_ms": PROMOTED_AT,
                                                       "groups": ["g"], "steps": steps})

    @staticmethod
    def sync(cluster: FakeCluster, topic: str, sync: OffsetSync) -> None:
        cluster.create_topic(topic, 1, 1, {})
        cluster.produce(topic, 0, (sync.key_bytes(), sync.value_bytes(), None), timestamp_ms=TS)

    def run(self) -> dict[str, dict]:
        return rollback_topics(SPEC, kafka(self.source), kafka(self.destination), self.store, [TOPIC],
                               quiesce_window_s=0)

    def snapshot(self) -> tuple:
        clusters = (self.source, self.destination)
        return ([list(self.store.log)], [{g: dict(v.offsets) for g, v in c.groups.items()} for c in clusters],
                [{t: [list(p.records) for p in v.partitions] for t, v in c.topics.items()} for c in clusters])


@pytest.fixture
def m(work) -> CopiedBack:  # work: KFERRY_WORK_DIR in tmp_path (the scope's runner resolves a work dir)
    return CopiedBack()


def test_a_run_resumed_after_the_copy_back_reconciles_commits_the_exact_source_offset_and_marks_it(m):
    record = m.run()[TOPIC]
    assert record["status"] == rb.ROLLED_BACK and record["promoted_at_ms"] == PROMOTED_AT
    assert record["steps"]["reconcile"]["summary"] == {"partitions_checked": 1, "records_checked": 3}
    assert m.source.group_offsets("g") == {(TOPIC, 0): 12}  # destination 8 was copied back to source 12
    (resume,) = record["steps"]["groups"]["summary"]["rolled_back"]["g"]
    assert (resume["destination_offset"], resume["source_offset"], resume["method"]) == (8, 12, "copied-back-record")
    assert TOPIC not in read_promotions(m.store, TOPIC_PROMOTION_KIND)  # catch-up copies it again
    assert "g" not in read_promotions(m.store, GROUP_PROMOTION_KIND)
    before = m.snapshot()
    assert m.run() == {TOPIC: record}  # rolled back: a second run changes nothing
    assert m.snapshot() == before


def test_a_copy_back_that_differs_from_the_destination_stops_before_any_group_is_committed(m):
    m.source.topics[TOPIC].partitions[0].records[11] = (b"new1", b"other", TS + 1,
                                                        [("app", b"1"), *provenance_headers("destination-id", 7)])
    with pytest.raises(RollbackMismatch, match=rf"{TOPIC}-0: 3 records after the cutover vs 3 copied back"):
        m.run()
    assert m.source.group_offsets("g") == {}
    record = rb.topic_rollbacks(m.store)[TOPIC]
    assert record["status"] == "in-progress" and sorted(record["steps"]) == ["copy_back", "quiesce"]
    assert read_promotions(m.store, TOPIC_PROMOTION_KIND)[TOPIC].promoted


def test_a_whole_rollback_resumed_after_its_copy_back_commits_reconciles_and_marks_once(tmp_path):
    """``promotion.rollback``'s steps after the copy-back, on the same clusters promoted as a whole."""
    m = CopiedBack(whole=True)
    runner = RollbackRunner(SPEC, kafka(m.source), kafka(m.destination), m.store, work_dir=tmp_path)
    report = runner.run()
    assert report["status"] == rb.ROLLED_BACK and report["promoted_at_ms"] == PROMOTED_AT
    assert {step: r["status"] for step, r in report["this_run"].items()} == {
        "quiesce": "resumed", "copy_back": "resumed", "commit_offsets": "done", "fences": "done", "reconcile": "done",
        "mark_rolled_back": "done"}  # the copy-back (it needs the brokers) is not run again
    assert m.source.group_offsets("g") == {(TOPIC, 0): 12}  # destination 8 was copied back to source 12
    (resume,) = report["groups"]["g"]
    assert (resume["destination_offset"], resume["source_offset"], resume["method"]) == (8, 12, "copied-back-record")
    assert report["this_run"]["reconcile"]["summary"] == {"partitions_checked": 1, "records_checked": 3}
    assert promotion_status(m.store) is None  # the promotion's records cleared after the mark
    before = m.snapshot()
    again = RollbackRunner(SPEC, kafka(m.source), kafka(m.destination), m.store, work_dir=tmp_path).run()
    assert again["status"] == rb.ROLLED_BACK
    assert {r["status"] for r in again["this_run"].values()} == {"resumed"}
    assert m.snapshot() == before  # rolled back: nothing changes on either cluster or in the state
