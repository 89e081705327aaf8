"""Promote one consumer group while producers keep writing to the source.

Steps (``GROUP_TABLE`` below, names ``core.cutover.step_names.GroupStep``; run by ``promotion.step_runner``), each
recorded in the group's promotion record when done so an interrupted run resumes at the first missing one, and a
promoted group is left as it is:
  source_quiet  the group has no members on the source (its consumers stopped; their last commit is final)
  final_copy    the group's topics copied at least up to the source's end at that moment (later records keep
                coming with catch-up batches: producers are still on the source)
  translated    exact translation of the group's committed source offsets; any flagged decision stops here
  committed     committed on the destination, refused while the destination group has members, and refused
                (``core.offsets.groups_ahead``, naming ``allow_rewind``) when it is committed past the translation there
  reconciled    the copied ranges of the group's topics compared record by record
  promoted      from now on catch-up runs never commit this group's offsets again
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kafka_ferry.copy.catch_up import NotCaughtUp, RunPlan, copy_until
from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import StagedCutoverError, UnitPromotion, start_or_resume
from kafka_ferry.core.cutover.step_names import GroupStep
from kafka_ferry.core.cutover.step_table import Step, StepOutcome, StepTable, Summary
from kafka_ferry.core.offsets.groups_ahead import refuse_groups_ahead
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.promotion.commit import commit_translated_offsets
from kafka_ferry.promotion.readiness import active_groups
from kafka_ferry.promotion.reconcile import reconcile_copies
from kafka_ferry.promotion.step_runner import run_table
from kafka_ferry.provision.fences import lift_after_promoted, lift_fence
from kafka_ferry.state.fences import group_fence_key
from kafka_ferry.state.offset_decisions import expected_group_offsets
from kafka_ferry.state.progress import migrated_groups, read_progress
from kafka_ferry.state.schema_ids import record_rewriter
from kafka_ferry.state.staged_cutover import read_promotions, save_promotion
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import load_partition_copies, translate_migration

log = logging.getLogger(__name__)


class GroupPromotionRefused(Retryable, RuntimeError):
    """A step's precondition does not hold (members on the source, an inexact translation, a mismatch)."""


def copy_up_to_source_end(spec: MigrationSpec, source, destination, store: MigrationStateStore,
                          topics: list[str], run_plan: RunPlan, max_batches: int = 100) -> dict:
    """Copy batches until every partition of ``topics`` is copied up to its end as read now (read_committed).

    Other topics are copied by the same batches (a plan covers the migration); records written after the
    snapshot are left to the next batch, so this ends while producers keep writing.
    """
    ends = source.list_offsets(source.partitions_of(topics), "latest", read_committed=True)

    def past_ends(plan: CopyPlan) -> bool:
        return not any(t.start_offset < ends[(t.source_topic, t.partition)]
                       for t in plan.tasks if (t.source_topic, t.partition) in ends)

    try:
        copied = copy_until(spec, source, destination, store, run_plan, "group-promotion", past_ends, max_batches)
    except NotCaughtUp:
        raise GroupPromotionRefused(f"topics {topics} not copied up to {ends} after {max_batches} batches") from None
    return {"batches": copied["batches"], "ends": {f"{t}:{p}": o for (t, p), o in sorted(ends.items())}}


@dataclass
class GroupPromotion:
    """One run of a group's promotion: what its steps are handed, and its record as the steps complete it."""

    spec: MigrationSpec
    source: KafkaCluster
    destination: KafkaCluster
    store: MigrationStateStore
    group: str
    topics: list[str]
    run_plan: RunPlan
    allow_rewind: bool
    record: UnitPromotion

    def save(self, outcome: StepOutcome) -> None:
        """``GROUP_TABLE``'s recorder: the step joins the group's record (with its summary as detail) and the record
        is stored, so an interrupted run resumes after it."""
        detail = {outcome.step: dict(outcome.summary)} if outcome.summary else {}
        self.record = self.record.with_step(GROUP_PROMOTION_KIND, outcome.step, outcome.finished_at_ms, **detail)
        save_promotion(self.store, GROUP_PROMOTION_KIND, self.record)


def promote_group(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster, store: MigrationStateStore,
                  group: str, run_id: str, run_plan: RunPlan, allow_rewind: bool = False,
                  before_change: Callable[[], object] | None = None) -> UnitPromotion:
    """Run (or resume) the group's promotion; returns its record. A promoted group is returned untouched.
    ``before_change``: called after the group's last refusal, before its first change (``run_table``)."""
    groups = migrated_groups(store)
    if group not in groups:
        raise StagedCutoverError(f"group {group!r} is not part of migration {spec.name}; migrated: {sorted(groups)}")
    record = start_or_resume(GROUP_PROMOTION_KIND, group, read_promotions(store, GROUP_PROMOTION_KIND).get(group),
                             run_id, _now_ms())
    run = GroupPromotion(spec, source, destination, store, group, groups[group], run_plan, allow_rewind, record)
    if not record.promoted:
        run_table(GROUP_TABLE, run, record.steps_done, f"group promotion {group}", before_change=before_change)
    # The promoted mark is stored: look at the fences once more (a catch-up run's provisioning may have put one
    # after the "promoted" step lifted it; see provision.fences.put_fences for both sides of this race).
    lift_after_promoted(destination, store, group_fence_key(group))
    return run.record


def _source_quiet(run: GroupPromotion) -> Summary:
    active = active_groups(run.source, [run.group])
    if active:
        raise GroupPromotionRefused(f"group {run.group} still has members on the source: {active[run.group]}")
    return None


def _final_copy(run: GroupPromotion) -> Summary:
    return copy_up_to_source_end(run.spec, run.source, run.destination, run.store, run.topics, run.run_plan)


def _translated(run: GroupPromotion) -> Summary:
    decisions = translate_migration(run.spec, run.source, run.destination, run.store, groups=[run.group]).decisions
    flagged = [d.describe() for d in decisions if d.flagged]
    if flagged:
        raise GroupPromotionRefused(f"group {run.group}: inexact translation: {flagged}")
    return {"decisions": [d.as_dict() for d in decisions]}


def _committed(run: GroupPromotion) -> Summary:
    if active_groups(run.source, [run.group]):  # a consumer came back on the source after the copy: start over
        raise GroupPromotionRefused(f"group {run.group} has members on the source again")
    decisions = translate_migration(run.spec, run.source, run.destination, run.store, groups=[run.group]).decisions
    if not run.allow_rewind:  # the pre-flight decides the settled cases; this one was past the copy or still consuming
        expected = expected_group_offsets(decisions)
        refuse_groups_ahead(run.spec.name, expected, run.destination.groups_offsets(expected), mode="promote-groups")
    outcomes = commit_translated_offsets(run.destination, decisions, allow_rewind=run.allow_rewind, strict=True)
    (outcome,) = outcomes or (None,)  # one group translated: one outcome, or none when nothing was to commit
    return {"committed": outcome.committed if outcome else {}}


def _reconciled(run: GroupPromotion) -> Summary:
    copies = load_partition_copies(run.spec, run.source, run.destination, read_progress(run.store))
    report = reconcile_copies(run.source, run.destination, [c for c in copies.values() if c.source_topic in run.topics],
                              record_rewriter(run.spec, run.store))
    report.raise_if_mismatched()
    return {"partitions": len(report.partitions), "ok": report.ok}


def _promoted(run: GroupPromotion) -> Summary:
    lifted = lift_fence(run.destination, run.store, group_fence_key(run.group))  # the record itself is the marker
    return {"fence_lifted": lifted} if lifted else None


def _now_ms() -> int:
    return int(time.time() * 1000)


# A group's promotion, in order (``core.cutover.step_names.GroupStep``); the DAG's ``promote_groups`` task runs it per
# group.
GROUP_TABLE: StepTable[GroupPromotion] = StepTable("group promotion", GroupStep, (
    Step(GroupStep.SOURCE_QUIET, _source_quiet, "the step only (no members on the source)", "promote_groups",
         reads_only=True),
    Step(GroupStep.FINAL_COPY, _final_copy, "the batches and the source ends copied up to", "promote_groups"),
    Step(GroupStep.TRANSLATED, _translated, "the group's exact translation decisions", "promote_groups"),
    Step(GroupStep.COMMITTED, _committed, "the offsets committed on the destination", "promote_groups"),
    Step(GroupStep.RECONCILED, _reconciled, "the partitions compared, ok", "promote_groups"),
    Step(GroupStep.PROMOTED, _promoted, "promoted_at_ms (and the fence lifted)", "promote_groups"),
), GroupPromotion.save)
