"""Promote topics (their producers move) once every migrated group reading them is promoted or waived.

Steps (``TOPIC_TABLE`` below, names ``core.cutover.step_names.TopicStep``; run by ``promotion.step_runner``), recorded
per topic so an interrupted run resumes:
  source_quiet  the topic's source end offsets did not move for ``quiet_window_s`` (its producers stopped)
  final_copy    copied to lag 0
  reconciled    the copied ranges compared record by record
  promoted      copy batches leave the topic out from now on (``copy.plan`` reads the marker)
The rule check (invariant B of ``core.cutover.staged_cutover``) runs first, for every chosen topic, before anything
changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafka_ferry.core.common.state_records import TOPIC_PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import (
    UnitPromotion,
    check_topic_promotion,
    start_or_resume,
    validate_selection,
)
from kafka_ferry.core.cutover.step_names import TopicStep
from kafka_ferry.core.cutover.step_table import Step, StepOutcome, StepTable, Summary
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.promotion.group import GroupPromotionRefused, RunPlan, copy_up_to_source_end
from kafka_ferry.promotion.reconcile import reconcile_copies
from kafka_ferry.promotion.step_runner import run_table
from kafka_ferry.provision.fences import lift_after_promoted, lift_fence
from kafka_ferry.state.fences import topic_fence_key
from kafka_ferry.state.progress import migrated_groups, read_progress
from kafka_ferry.state.schema_ids import record_rewriter
from kafka_ferry.state.staged_cutover import promoted_groups, read_promotions, save_promotion
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import load_partition_copies

log = logging.getLogger(__name__)


@dataclass
class TopicPromotion:
    """One run of a topic's promotion: what its steps are handed, and its record as the steps complete it."""

    spec: MigrationSpec
    source: KafkaCluster
    destination: KafkaCluster
    store: MigrationStateStore
    topic: str
    run_plan: RunPlan
    quiet_window_s: float
    waived_groups: Sequence[str]
    record: UnitPromotion

    def save(self, outcome: StepOutcome) -> None:
        """``TOPIC_TABLE``'s recorder: the step joins the topic's record (its summary as detail; the promoted step
        also names the waived groups) and the record is stored, so an interrupted run resumes after it."""
        extra: dict[str, object] = {outcome.step: dict(outcome.summary)} if outcome.summary else {}
        if outcome.step == TopicStep.PROMOTED and self.waived_groups:
            extra["waived_groups"] = sorted(self.waived_groups)
        self.record = self.record.with_step(TOPIC_PROMOTION_KIND, outcome.step, outcome.finished_at_ms, **extra)
        save_promotion(self.store, TOPIC_PROMOTION_KIND, self.record)


def promote_topics(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster, store: MigrationStateStore,
                   topics: list[str], run_id: str, run_plan: RunPlan, waived_groups: Sequence[str] = (),
                   quiet_window_s: float = 5.0, migrated_topics: list[str] | None = None,
                   before_change: Callable[[], object] | None = None) -> dict[str, UnitPromotion]:
    """Run (or resume) each chosen topic's promotion; refused up front naming any unpromoted reading group.
    ``before_change``: called after the last refusal, before the first change (``run_table``)."""
    readers = migrated_groups(store)
    if migrated_topics is None:
        from kafka_ferry.core.provisioning.provisioning_plan import select_topics

        migrated_topics = select_topics(spec, source.list_topic_names())
    topics = validate_selection("topics", topics, migrated_topics)
    if waived_groups:
        validate_selection("waived groups", waived_groups, readers)
    check_topic_promotion(topics, readers, promoted_groups(store), waived_groups)
    stored = read_promotions(store, TOPIC_PROMOTION_KIND)
    out = {}
    for topic in topics:
        record = start_or_resume(TOPIC_PROMOTION_KIND, topic, stored.get(topic), run_id, _now_ms())
        run = TopicPromotion(spec, source, destination, store, topic, run_plan, quiet_window_s, waived_groups, record)
        if not record.promoted:
            run_table(TOPIC_TABLE, run, record.steps_done, f"topic promotion {topic}", before_change=before_change)
        # the promoted mark is stored: a fence a catch-up run put meanwhile goes too (provision.fences.put_fences)
        lift_after_promoted(destination, store, topic_fence_key(spec.topics.rename.destination_topic(topic)))
        out[topic] = run.record
    return out


def _source_quiet(run: TopicPromotion) -> Summary:
    parts = run.source.partitions_of([run.topic])
    before = run.source.list_offsets(parts, "latest", read_committed=False)
    time.sleep(run.quiet_window_s)
    after = run.source.list_offsets(parts, "latest", read_committed=False)
    moved = {f"{t}:{p}": (before[(t, p)], after[(t, p)]) for t, p in parts if before[(t, p)] != after[(t, p)]}
    if moved:
        raise GroupPromotionRefused(f"topic {run.topic} is still written on the source (end offsets moved in "
                                    f"{run.quiet_window_s} s: {moved}): stop its producers first")
    return {"ends": {f"{t}:{p}": o for (t, p), o in sorted(after.items())}}


def _final_copy(run: TopicPromotion) -> Summary:
    return copy_up_to_source_end(run.spec, run.source, run.destination, run.store, [run.topic], run.run_plan)


def _reconciled(run: TopicPromotion) -> Summary:
    copies = load_partition_copies(run.spec, run.source, run.destination, read_progress(run.store))
    report = reconcile_copies(run.source, run.destination, [c for c in copies.values() if c.source_topic == run.topic],
                              record_rewriter(run.spec, run.store))
    report.raise_if_mismatched()
    return {"partitions": len(report.partitions), "ok": report.ok}


def _promoted(run: TopicPromotion) -> Summary:
    """Copy batches leave the topic out from now on (the record itself is the marker); its fence goes."""
    mirror = run.spec.topics.rename.destination_topic(run.topic)
    lifted = lift_fence(run.destination, run.store, topic_fence_key(mirror))
    return {"fence_lifted": lifted} if lifted else None


def _now_ms() -> int:
    return int(time.time() * 1000)


# A topic's promotion, in order (``core.cutover.step_names.TopicStep``); the DAG's ``promote_topics`` task runs it per
# topic.
TOPIC_TABLE: StepTable[TopicPromotion] = StepTable("topic promotion", TopicStep, (
    Step(TopicStep.SOURCE_QUIET, _source_quiet, "the source end offsets that stayed put", "promote_topics",
         reads_only=True),
    Step(TopicStep.FINAL_COPY, _final_copy, "the batches and the source ends copied up to", "promote_topics"),
    Step(TopicStep.RECONCILED, _reconciled, "the partitions compared, ok", "promote_topics"),
    Step(TopicStep.PROMOTED, _promoted, "promoted_at_ms, the waived groups (and the fence lifted)", "promote_topics"),
), TopicPromotion.save)
