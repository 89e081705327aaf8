"""Promote topics (their producers move) once every migrated group reading them is promoted or waived.

Steps (``core.staged_cutover.TOPIC_STEPS``), recorded per topic so an interrupted run resumes:
  source_quiet  the topic's source end offsets did not move for ``quiet_window_s`` (its producers stopped)
  final_copy    copied to lag 0
  reconciled    the copied ranges compared record by record
  promoted      copy batches leave the topic out from now on (``copy.plan`` reads the marker)
The rule check (invariant B of ``core.staged_cutover``) runs first, for every chosen topic, before anything changes.
"""

from __future__ import annotations

import logging
import time

from kafka_ferry.core.spec import MigrationSpec
from kafka_ferry.core.staged_cutover import (
    UnitPromotion,
    check_topic_promotion,
    next_step,
    start_or_resume,
    validate_selection,
)
from kafka_ferry.core.state_records import TOPIC_PROMOTION_KIND
from kafka_ferry.promotion.group import GroupPromotionRefused, RunPlan, copy_up_to_source_end
from kafka_ferry.promotion.reconcile import reconcile_copies
from kafka_ferry.provision.fences import lift_after_promoted, lift_fence
from kafka_ferry.state.fences import topic_fence_key
from kafka_ferry.state.progress import migrated_groups, read_progress
from kafka_ferry.state.schema_ids import record_rewriter
from kafka_ferry.state.staged_cutover import promoted_groups, read_promotions, save_promotion
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import load_partition_copies

log = logging.getLogger(__name__)


def promote_topics(spec: MigrationSpec, source, destination, store: MigrationStateStore, topics: list[str],
                   run_id: str, run_plan: RunPlan, waived_groups: list[str] = (), quiet_window_s: float = 5.0,
                   migrated_topics: list[str] | None = None) -> dict[str, UnitPromotion]:
    """Run (or resume) each chosen topic's promotion; refused up front naming any unpromoted reading group."""
    readers = migrated_groups(store)
    if migrated_topics is None:
        from kafka_ferry.core.provisioning_plan import select_topics

        migrated_topics = select_topics(spec, source.list_topic_names())
    topics = validate_selection("topics", topics, migrated_topics)
    if waived_groups:
        validate_selection("waived groups", waived_groups, readers)
    check_topic_promotion(topics, readers, promoted_groups(store), waived_groups)
    stored = read_promotions(store, TOPIC_PROMOTION_KIND)
    out = {}
    for topic in topics:
        record = start_or_resume(TOPIC_PROMOTION_KIND, topic, stored.get(topic), run_id, _now_ms())
        while (step := next_step(TOPIC_PROMOTION_KIND, record)) is not None:
            detail = _run_step(step, spec, source, destination, store, topic, run_plan, quiet_window_s)
            extra = {step: detail} if detail else {}
            if step == "promoted" and waived_groups:
                extra["waived_groups"] = sorted(waived_groups)
            record = record.with_step(TOPIC_PROMOTION_KIND, step, _now_ms(), **extra)
            save_promotion(store, TOPIC_PROMOTION_KIND, record)
            log.info("topic promotion %s: %s done %s", topic, step, detail or "")
        # the promoted mark is stored: a fence a catch-up run put meanwhile goes too (provision.fences.put_fences)
        lift_after_promoted(destination, store, topic_fence_key(spec.topics.rename.destination_topic(topic)))
        out[topic] = record
    return out


def _run_step(step, spec, source, destination, store, topic, run_plan, quiet_window_s) -> dict | None:
    if step == "source_quiet":
        parts = source.partitions_of([topic])
        before = source.list_offsets(parts, "latest", read_committed=False)
        time.sleep(quiet_window_s)
        after = source.list_offsets(parts, "latest", read_committed=False)
        moved = {f"{t}:{p}": (before[(t, p)], after[(t, p)]) for t, p in parts if before[(t, p)] != after[(t, p)]}
        if moved:
            raise GroupPromotionRefused(f"topic {topic} is still written on the source (end offsets moved in "
                                        f"{quiet_window_s} s: {moved}): stop its producers first")
        return {"ends": {f"{t}:{p}": o for (t, p), o in sorted(after.items())}}
    if step == "final_copy":
        return copy_up_to_source_end(spec, source, destination, store, [topic], run_plan)
    if step == "reconciled":
        copies = load_partition_copies(spec, source, destination, read_progress(store))
        report = reconcile_copies(source, destination, [c for c in copies.values() if c.source_topic == topic],
                                  record_rewriter(spec, store))
        report.raise_if_mismatched()
        return {"partitions": len(report.partitions), "ok": report.ok}
    lifted = lift_fence(destination, store, topic_fence_key(spec.topics.rename.destination_topic(topic)))
    return {"fence_lifted": lifted} if lifted else None  # promoted: copy batches leave the topic out from now on


def _now_ms() -> int:
    return int(time.time() * 1000)
