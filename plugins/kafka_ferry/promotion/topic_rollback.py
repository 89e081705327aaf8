"""Roll topics promoted in a staged cutover back to the source, while the migration's other promoted topics stay.

A promoted topic's producers write to the destination (``promotion.topic``) and every migrated group reading it is
promoted (or waived) and consumes there. Rolling it back is the whole-migration rollback (``promotion.rollback``)
restricted to that topic's partitions and the groups reading it:

    quiesce -> copy_back -> reconcile -> groups -> mark_rolled_back, then forget the promotion and fence again

(``TOPIC_ROLLBACK_TABLE`` at the bottom, names ``core.cutover.step_names.TopicRollbackStep``, run by
``promotion.step_runner``.)

- ``quiesce``: the topic's destination partitions keep their end offsets for the quiesce window and no group
  reading it has members on the destination.
- ``copy_back``: the copy-back of ``RollbackRunner`` over the topic's partitions only: the records produced on the
  destination after the topic's promotion, never one carrying this migration's provenance, exactly once (its own
  progress and sync log), stamped with the destination's provenance so the forward copy never brings them back. In
  schema remap mode it maps schema ids back like the whole-migration rollback (``promotion.rollback_schema_ids``:
  the fields the forward copy rewrote, the forward map turned around), over the topic's records only.
- ``reconcile``: those partitions, copied back against the destination (count and order-sensitive digest; in remap
  mode over the mapped-back ids).
- ``groups``: each promoted group reading the topic goes back with it (``promotion.group_rollback``: a group's
  consumers read from one cluster), its destination offsets translated to exact source offsets over the forward
  map and the copy-back's syncs, committed on the source. Groups that were waived never left the source.
- ``mark_rolled_back``: the topic's rollback record (``state.rollback`` key ``topic/<topic>``); then its
  promotion record goes (catch-up copies the topic again; it can be promoted later) and, with ``acls.fence``, the
  destination is fenced again for it and its groups.

Every step is recorded in the topic's record for the promotion it undoes, so a killed run resumes at the first step
not done; a second rollback finds the topic rolled back and changes nothing. Refused before any change (Permanent,
naming topic and cause): a topic that is not promoted, not migrated, a group reading it that also reads another
promoted topic not rolled back with it, and in remap mode a record of the topic to copy back carrying a destination
schema id the forward map never knew (checked before the first step, again before the copy-back: the error names
topic, partition, offset, id and its destination subject/version). Retryable: producers still writing, consumers
still there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafka_ferry.core.common.state_records import TOPIC_PROMOTION_KIND
from kafka_ferry.core.cutover.rollback_plan import CopyBackRange
from kafka_ferry.core.cutover.staged_cutover import UnitPromotion, validate_selection
from kafka_ferry.core.cutover.step_names import TopicRollbackStep
from kafka_ferry.core.cutover.step_table import Step, StepOutcome, StepTable, Summary
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.promotion.group_rollback import check_groups, rollback_group
from kafka_ferry.promotion.rollback import RollbackRefused, RollbackRunner, group_resumes
from kafka_ferry.promotion.rollback_rights import check_rollback_rights, plan_acls
from kafka_ferry.promotion.rollback_schema_ids import VersionsOfId
from kafka_ferry.promotion.step_runner import run_table
from kafka_ferry.provision.fences import put_fences
from kafka_ferry.state import rollback as rb
from kafka_ferry.state.progress import migrated_groups
from kafka_ferry.state.staged_cutover import forget_topic_promotion, promoted_groups, promoted_topics, read_promotions
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.state.topic_ownership import mirrored_topics

log = logging.getLogger(__name__)

TOPIC_STEPS = tuple(str(s) for s in TopicRollbackStep)


class TopicScope(RollbackRunner):
    """The whole-migration runner's copy-back, reconciliation and plan, over the chosen topics' partitions and
    the groups reading them only."""

    def __init__(self, spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                 store: MigrationStateStore, topics: Sequence[str], groups: Sequence[str], **kwargs) -> None:
        super().__init__(spec, source, destination, store, **kwargs)
        self.topics, self.groups = sorted(topics), sorted(groups)
        self.destination_topics = {spec.topics.rename.destination_topic(t) for t in self.topics}

    def rolled_back(self) -> str:
        return f"topic(s) {', '.join(self.topics)} of migration {self.spec.name!r}"

    def copy_back_ranges(self) -> list[CopyBackRange]:
        # the copy-back, its remap-mode id check and field plan, and the plan's id scan all read these ranges only
        return [r for r in super().copy_back_ranges() if r.source_topic in self.topics]

    def reverse_copies(self):
        return {k: c for k, c in super().reverse_copies().items() if k[0] in self.destination_topics}

    def resume_plan(self, predicted=None) -> dict[str, list[dict]]:
        forward, reverse = self.forward_copies(), super().reverse_copies()
        readers = migrated_groups(self.store)
        return {g: group_resumes(self.destination, g, readers.get(g, []), forward, reverse, predicted)
                for g in self.groups}

    def source_scope(self, copy_back: bool = True, commit: bool = True) -> tuple[list[str], list[str]]:
        return (list(self.topics) if copy_back else []), (list(self.groups) if commit else [])

    def quiesce(self) -> dict:
        """The topics' destination end offsets unchanged through the window, no reading group with members."""
        return self.quiesce_on(self.destination.partitions_of(sorted(self.destination_topics)), self.groups,
                               f"rollback of topic(s) {', '.join(self.topics)}")


def check_topics(spec: MigrationSpec, store: MigrationStateStore, topics: Sequence[str]) -> tuple[list[str], dict]:
    """The chosen topics (validated against the migrated ones) and, per topic, its promotion record or None when
    rolled back already; refused naming each topic that is neither, and each reading group that cannot go back."""
    state = store.read_all()
    chosen = validate_selection("topics", topics, sorted(mirrored_topics(store, state)))
    promotions = read_promotions(store, TOPIC_PROMOTION_KIND, state)
    rollbacks = rb.topic_rollbacks(store, state)
    out: dict[str, UnitPromotion | None] = {}
    problems: list[str] = []
    for t in chosen:
        p, done = promotions.get(t), rollbacks.get(t) or {}
        rolled_back = done.get("status") == rb.ROLLED_BACK
        if p is not None and p.promoted and not (rolled_back and done.get("promoted_at_ms") == p.promoted_at_ms):
            out[t] = p
        elif rolled_back:  # done (a killed run may have left the promotion mark: the run forgets it)
            out[t] = None
        else:
            problems.append(f"topic {t} is not promoted (no promoted mark in {store.topic}): nothing to roll back")
    moving = [t for t, p in out.items() if p is not None]
    still = set(promoted_topics(store, state)) - set(chosen)
    for g in readers_of(store, moving, state):
        other = sorted(set(migrated_groups(store, state)[g]) & still)
        if other:
            problems.append(f"group {g} reads {', '.join(sorted(set(moving) & set(migrated_groups(store, state)[g])))}"
                            f" and the promoted topic(s) {', '.join(other)}, which stay promoted: its consumers "
                            "read from one cluster; roll those topics back in the same run")
    if problems:
        raise RollbackRefused(f"rollback of topic(s) {', '.join(chosen)} of migration {spec.name} refused, nothing "
                              "was changed: " + "; ".join(problems))
    return chosen, out


def readers_of(store: MigrationStateStore, topics: Sequence[str], state=None) -> list[str]:
    """The promoted groups reading any of ``topics`` (they go back with them; waived ones never left the source)."""
    promoted = set(promoted_groups(store, state))
    return sorted(g for g, read in migrated_groups(store, state).items() if g in promoted and set(read) & set(topics))


def topic_rollback_plan(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                        store: MigrationStateStore, topics: Sequence[str], groups: Sequence[str] = (),
                        versions_of_id: VersionsOfId | None = None) -> dict:
    """The dry run: what rolling ``topics`` back would copy back and where their groups would resume (in remap
    mode: the schema-id section, naming every id that would refuse it); changes nothing (reads the clusters, the
    state topic and, with ``versions_of_id``, the destination registry only). ``groups``: other groups named with
    the topics; the run rolls them back too (``promotion.group_rollback``), so the plan refuses them as it would
    and shows where they would resume and the ACLs they need."""
    chosen, promotions = check_topics(spec, store, topics)
    moving = [t for t, p in promotions.items() if p is not None]
    readers = readers_of(store, moving)
    # checked as the run checks them before its first change (a missing ACL is listed below, as in every plan)
    others = check_groups(spec, source, store, [g for g in groups if g not in readers], with_topics=chosen,
                          rights=False)
    scope = TopicScope(spec, source, destination, store, moving, readers + others, versions_of_id=versions_of_id)
    if moving:
        plan = scope.plan()
    else:  # nothing to copy back; the other groups still go (they read no topic moving here: no predicted syncs)
        plan = {"copy_back": [], "records": 0, "groups": scope.resume_plan() if others else {},
                **({"acls": plan_acls(spec, source, [], others)} if others else {})}
    return {**plan, "migration": spec.name, "topics": {t: "promoted" if promotions[t] else rb.ROLLED_BACK
                                                       for t in chosen}}


def rollback_topics(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster, store: MigrationStateStore,
                    topics: Sequence[str], quiesce_window_s: float = 5.0,
                    after_step: Callable[[str], None] | None = None,
                    versions_of_id: VersionsOfId | None = None,
                    before_change: Callable[[], object] | None = None) -> dict[str, dict]:
    """Roll ``topics`` back (or finish their interrupted rollback); returns each topic's rollback record.
    ``versions_of_id``: the destination registry's, to name an id that cannot map back (remap mode, optional);
    ``after_step`` is a test seam (e.g. to kill the run after a step); ``before_change``: called after the last
    refusal, before the first change (``run_table``; or before a resumed run's last forgetting)."""
    chosen, promotions = check_topics(spec, store, topics)
    moving = {t: p for t, p in promotions.items() if p is not None}
    stored = rb.topic_rollbacks(store)
    records = {t: _in_progress(stored.get(t), p.promoted_at_ms) for t, p in moving.items()}
    # a resumed run: groups the killed one rolled back are not promoted any more, the record still names them
    groups = sorted(set(readers_of(store, list(moving))).union(*(r.get("groups", []) for r in records.values())))
    for r in records.values():
        r["groups"] = groups
    scope = TopicScope(spec, source, destination, store, list(moving), groups, quiesce_window_s=quiesce_window_s,
                       versions_of_id=versions_of_id)
    run = TopicRollback(spec, source, destination, store, scope, list(moving), groups, records)
    if moving:
        done = [s for s in TOPIC_STEPS if all(s in r["steps"] for r in records.values())]
        plan = TOPIC_ROLLBACK_TABLE.plan(done)
        todo = [s for s in plan.to_run if s != TopicRollbackStep.MARK_ROLLED_BACK]
        if todo:  # before any change: the source principal's rights for the steps still to run, named if missing
            check_rollback_rights(spec, source, f"rollback of topic(s) {', '.join(moving)}",
                                  *scope.source_scope(copy_back=TopicRollbackStep.COPY_BACK in todo,
                                                      commit=TopicRollbackStep.GROUPS in todo))
        if TopicRollbackStep.COPY_BACK in todo:
            # remap mode: an id the forward map never knew refuses before the first step records anything (the
            # copy-back checks again, for records produced meanwhile)
            scope.refuse_unmapped_ids()
        run_table(TOPIC_ROLLBACK_TABLE, run, done, f"topic rollback {', '.join(moving)}", after_step=after_step,
                  plan=plan, before_change=before_change)
    promotions, rollbacks = read_promotions(store, TOPIC_PROMOTION_KIND), rb.topic_rollbacks(store)
    for t in chosen:  # after the mark: a crash between leaves both, the rerun forgets (only the promotion undone)
        p = promotions.get(t)
        if p is not None and p.promoted and p.promoted_at_ms == (rollbacks.get(t) or {}).get("promoted_at_ms"):
            if before_change is not None:
                before_change()
            forget_topic_promotion(store, t)
    if spec.acls.fence:  # the topics and their groups are unpromoted again: fenced like any unpromoted unit
        put_fences(spec, source, destination, store)
    return {t: r for t, r in rb.topic_rollbacks(store).items() if t in chosen}


def _in_progress(record: dict | None, promoted_at_ms: int | None) -> dict:
    """The topic's rollback record for this promotion of it (its steps done so far), or a new one."""
    if record and record.get("promoted_at_ms") == promoted_at_ms and record.get("status") == "in-progress":
        return record
    return {"status": "in-progress", "promoted_at_ms": promoted_at_ms, "steps": {}}


@dataclass
class TopicRollback:
    """One run of the topics' rollback: what its steps are handed, and each topic's record as they complete it."""

    spec: MigrationSpec
    source: KafkaCluster
    destination: KafkaCluster
    store: MigrationStateStore
    scope: TopicScope
    topics: list[str]
    groups: list[str]
    records: dict[str, dict]

    def save(self, outcome: StepOutcome) -> None:
        """``TOPIC_ROLLBACK_TABLE``'s recorder: each topic's record gets the step (duration, summary), stored, so a
        killed run resumes after it; ``mark_rolled_back`` is recorded as the records' status itself."""
        for topic, record in self.records.items():
            if outcome.step == TopicRollbackStep.MARK_ROLLED_BACK:
                rb.save_topic_rollback(self.store, topic, {**record, "status": rb.ROLLED_BACK,
                                                           "rolled_back_at_ms": outcome.finished_at_ms})
                continue
            record["steps"][outcome.step] = {"duration_s": round(outcome.duration_s, 3), "summary": outcome.summary}
            rb.save_topic_rollback(self.store, topic, record)


def _quiesce(run: TopicRollback) -> Summary:
    return run.scope.quiesce()


def _copy_back(run: TopicRollback) -> Summary:
    return run.scope._step_copy_back()


def _reconcile(run: TopicRollback) -> Summary:
    return run.scope._step_reconcile()


def _groups(run: TopicRollback) -> Summary:
    """Each promoted group reading the topics goes back with them (``promotion.group_rollback``)."""
    return {"rolled_back": {g: rollback_group(run.spec, run.source, run.destination, run.store, g,
                                              with_topics=run.topics)["offsets"] for g in run.groups}}


def _mark_rolled_back(run: TopicRollback) -> Summary:
    """Nothing but the mark, which the recorder writes (status rolled-back on each topic's record)."""
    return None


# The topics' rollback, in order (``core.cutover.step_names.TopicRollbackStep``); the DAG's ``rollback`` task runs it
# (mode rollback with *Topics*). Each topic's record (kind "rollback", key ``topic/<topic>``) carries the steps done.
TOPIC_ROLLBACK_TABLE: StepTable[TopicRollback] = StepTable("topic rollback", TopicRollbackStep, (
    Step(TopicRollbackStep.QUIESCE, _quiesce, "the partitions and groups found quiet, and the window", "rollback",
         reads_only=True),
    Step(TopicRollbackStep.COPY_BACK, _copy_back, "the partitions and records copied back", "rollback"),
    Step(TopicRollbackStep.RECONCILE, _reconcile, "the partitions and records compared", "rollback"),
    Step(TopicRollbackStep.GROUPS, _groups, "each reading group's source offsets committed", "rollback"),
    Step(TopicRollbackStep.MARK_ROLLED_BACK, _mark_rolled_back, "status rolled-back, rolled_back_at_ms", "rollback"),
), TopicRollback.save)
