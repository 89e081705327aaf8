"""Roll one group of a staged cutover back to the source, while the migration's other promoted groups stay.

A promoted group's consumers read the destination while producers still write to the source (``promotion.group``):
nothing was produced on the destination for it, so nothing is copied back. Its destination offsets translate to
exact source offsets (``core.cutover.rollback_plan.resume_on_source`` over the forward map, and the copy-back's syncs
where a whole-migration rollback ran before), are committed on the source, and the group is a migrated, unpromoted group
again: catch-up runs translate and commit it, and ``promote-groups`` can move it later.

Order, each step idempotent so a killed run resumes: decide (stored once per promotion, key ``resume/<group>``) ->
commit on the source -> mark rolled back (``group/<group>``) -> forget the promotion -> fence the destination again
(with ``acls.fence``). A rerun after the mark only finishes the last two; a second rollback of the group changes
nothing. A group reading a promoted topic is refused: its producers write to the destination, which only a rollback
of that topic (``promotion.topic_rollback``, which takes the group along) or of the whole migration copies back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeGuard

from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import UnitPromotion
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.promotion.readiness import active_groups
from kafka_ferry.promotion.rollback import DestinationNotQuiet, RollbackRefused, commit_on_source, group_resumes
from kafka_ferry.promotion.rollback_rights import check_rollback_rights, plan_acls
from kafka_ferry.provision.fences import put_fences
from kafka_ferry.state import rollback as rb
from kafka_ferry.state.progress import migrated_groups, read_progress
from kafka_ferry.state.staged_cutover import forget_group_promotion, promoted_topics, read_promotions
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import copied_back, load_partition_copies

log = logging.getLogger(__name__)


def _committed(done: dict | None, promotion: UnitPromotion) -> TypeGuard[dict]:
    """The group's rollback record ``done`` is for this promotion: a killed run committed its offsets on the source
    already, so only forgetting the promotion and the fences are left (no refusal, no rights, no commit again)."""
    return done is not None and bool(done) and done.get("promoted_at_ms") == promotion.promoted_at_ms


def check_group(spec: MigrationSpec, source: KafkaCluster, store: MigrationStateStore, group: str,
                with_topics: Sequence[str] = (), rights: bool = True) -> tuple[UnitPromotion | None, dict | None]:
    """The refusals of ``group``'s rollback, before any change (Permanent, naming the group and the cause): not
    promoted and not rolled back either (an unknown name too), reading a promoted topic not going back in the same run
    (``with_topics``), and (``rights``) the source principal lacking READ on it. Reads only. Returns its promotion
    (None: rolled back already, nothing to do) and its rollback record (for this promotion: a killed run committed it,
    only forgetting the promotion and the fences are left)."""
    promotion = read_promotions(store, GROUP_PROMOTION_KIND).get(group)
    done = rb.group_rollback(store, group)
    if promotion is None or not promotion.promoted:
        if done and done.get("status") == rb.ROLLED_BACK:
            return None, done
        raise RollbackRefused(f"group {group!r} of migration {spec.name} is not promoted: nothing to roll back")
    if not _committed(done, promotion):
        topics = migrated_groups(store).get(group, [])
        moved = sorted(set(promoted_topics(store)) & set(topics) - set(with_topics))
        if moved:
            raise RollbackRefused(f"group {group!r} reads promoted topic(s) {', '.join(moved)}: their producers "
                                  "write to the destination; roll those topics back (mode rollback, topics) or the "
                                  "whole migration")
        if rights:
            check_rollback_rights(spec, source, f"rollback of group {group!r}", [], [group])  # READ on it, to commit
    return promotion, done


def check_groups(spec: MigrationSpec, source: KafkaCluster, store: MigrationStateStore, groups: Sequence[str],
                 with_topics: Sequence[str] = (), rights: bool = True) -> list[str]:
    """``check_group`` for every group named, before any of them (or a topic run with them) changes anything: one
    refusal naming each group refused (a typo among several names fails the run, not the rest of it), then one
    rights check over the groups still to commit. Returns those (a group rolled back already is left out)."""
    todo, problems = [], []
    for g in groups:
        try:
            promotion, done = check_group(spec, source, store, g, with_topics, rights=False)
        except RollbackRefused as exc:
            problems.append(str(exc))
            continue
        if promotion is not None and not _committed(done, promotion):
            todo.append(g)
    if problems:
        raise RollbackRefused(problems[0] if len(problems) == 1 else  # one: the very refusal rollback_group gives
                              f"rollback of group(s) {', '.join(groups)} refused, nothing was changed: "
                              + "; ".join(problems))
    if rights and todo:
        check_rollback_rights(spec, source, f"rollback of group(s) {', '.join(todo)}", [], todo)
    return todo


def group_rollback_plan(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                        store: MigrationStateStore, groups: Sequence[str]) -> dict:
    """The dry run of rolling ``groups`` back: refused exactly as the real run would refuse (``check_groups``;
    a missing ACL is listed under ``acls``, as in every rollback plan), else where each group still to commit
    would resume on the source (its stored decision if a killed run made one) and the ACLs that needs. Reads
    only."""
    todo = check_groups(spec, source, store, groups, rights=False)
    promotions = read_promotions(store, GROUP_PROMOTION_KIND)
    readers = migrated_groups(store)
    forward = load_partition_copies(spec, source, destination, read_progress(store)) if todo else {}
    reverse = copied_back(spec, source, store) if todo else {}
    resumes = {g: rb.group_resume(store, g, promotions[g].promoted_at_ms)
               or group_resumes(destination, g, readers.get(g, []), forward, reverse) for g in todo}
    return {"groups": resumes, "acls": plan_acls(spec, source, [], todo),
            "rolled_back_already": sorted(set(groups) - set(todo))}


def rollback_group(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster, store: MigrationStateStore,
                   group: str, with_topics: Sequence[str] = (),
                   before_change: Callable[[], object] | None = None) -> dict:
    """Roll ``group`` back (or finish its interrupted rollback); returns its rollback record. ``with_topics``:
    promoted topics going back in the same run (``promotion.topic_rollback``, which copied them back first).
    ``before_change``: called after the group's last refusal, before its first change (the act is recorded there,
    so a refused or rolled-back-already group writes nothing)."""
    promotion, done = check_group(spec, source, store, group, with_topics)
    if promotion is None:
        assert done is not None  # check_group: no promotion to roll back means its rollback record is returned
        log.info("group rollback %s: rolled back at %s already, nothing to do", group, done["rolled_back_at_ms"])
        return done
    at = promotion.promoted_at_ms
    if not _committed(done, promotion):
        topics = migrated_groups(store).get(group, [])
        active = active_groups(destination, [group])
        if active:
            raise DestinationNotQuiet(f"group {group} has {active[group]} on the destination: stop its consumers")
        if before_change is not None:
            before_change()
        stored = rb.group_resume(store, group, at)
        if stored is None:
            forward = load_partition_copies(spec, source, destination, read_progress(store))
            stored = group_resumes(destination, group, topics, forward, copied_back(spec, source, store))
            rb.save_group_resume(store, group, stored, at)
        commit_on_source(source, group, stored)
        done = {"status": rb.ROLLED_BACK, "promoted_at_ms": at, "rolled_back_at_ms": int(time.time() * 1000),
                "offsets": stored}
        rb.save_group_rollback(store, group, done)
    elif before_change is not None:  # committed by a killed run: forgetting its promotion is this run's change
        before_change()
    forget_group_promotion(store, group)  # a migrated, unpromoted group again: catch-up runs commit it
    if spec.acls.fence:
        put_fences(spec, source, destination, store)
    log.info("group rollback %s: done, resumes on the source at %s", group,
             {f"{r['source_topic']}-{r['partition']}": r["source_offset"] for r in done["offsets"]})
    return done
