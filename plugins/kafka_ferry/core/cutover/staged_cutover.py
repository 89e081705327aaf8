"""Staged cutover rules: consumer groups move one by one while producers still write to the source, then topics.

Pure (no Kafka, no Airflow): the folders above feed it what they read from the clusters and the state topic.

Invariants (provisioning, copy and promotion rely on them; tests assert them):
  A. A promoted group is never committed by the tool again: ``groups_to_commit`` drops it whatever the input.
  B. A topic may be promoted only when every migrated group reading it is promoted or explicitly waived;
     otherwise ``check_topic_promotion`` refuses and names every blocking group.
  C. A promoted topic is not copied again: ``topics_to_copy`` drops it.
  D. A group promotion runs its steps in ``GROUP_STEPS`` order; ``next_step`` resumes at the first step not
     recorded as done and returns None once the group is promoted (promoting twice changes nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND, TOPIC_PROMOTION_KIND, StateKind
from kafka_ferry.core.cutover.step_names import GroupStep, TopicRollbackStep, TopicStep
from kafka_ferry.core.cutover.step_table import plan_steps

# A group's promotion, in order (``core.cutover.step_names``; ``promotion.group.GROUP_TABLE`` runs them). Each step is
# idempotent and recorded when done, so an interrupted run resumes. Plain strings: what the records store.
GROUP_STEPS = tuple(str(s) for s in GroupStep)
TOPIC_STEPS = tuple(str(s) for s in TopicStep)
# A promoted topic's rollback, in order (``promotion.topic_rollback``; the run pages count them).
TOPIC_ROLLBACK_STEPS = tuple(str(s) for s in TopicRollbackStep)
PROMOTED = str(GroupStep.PROMOTED)


class StagedCutoverError(Permanent, ValueError):
    """A staged-cutover request that the rules refuse, or a malformed record; the message names the group or topic.
    Permanent: the same request against the same state is refused again (a retry cannot promote a blocking group
    or make an unknown name part of the migration)."""


@dataclass(frozen=True)
class UnitPromotion:
    """The state record of one group's or one topic's promotion: which steps are done, by which run, when."""

    name: str
    run_id: str
    steps_done: tuple[str, ...] = ()
    started_at_ms: int = 0
    promoted_at_ms: int | None = None
    detail: Mapping[str, object] = field(default_factory=dict)

    @property
    def promoted(self) -> bool:
        return PROMOTED in self.steps_done

    def to_record(self) -> dict[str, Any]:
        out = asdict(self)
        out["steps_done"] = list(self.steps_done)
        out["detail"] = dict(self.detail)
        return out

    @classmethod
    def from_record(cls, kind: StateKind, key: str, record: Mapping[str, object]) -> UnitPromotion:
        """Read a stored record; a malformed one is an error naming the kind, key, field and value."""
        steps = _steps_for(kind)
        done = record.get("steps_done", [])
        if not isinstance(done, list) or any(s not in steps for s in done):
            raise StagedCutoverError(f"state record {kind}/{key}: field steps_done={done!r} is not a list of {steps}")
        run_id = record.get("run_id")
        if not isinstance(run_id, str) or not run_id:
            raise StagedCutoverError(f"state record {kind}/{key}: field run_id={run_id!r} is not a non-empty string")
        started, promoted, detail = record.get("started_at_ms") or 0, record.get("promoted_at_ms"), record.get("detail")
        for name, value, expected in (("started_at_ms", started, isinstance(started, int)),
                                       ("promoted_at_ms", promoted, promoted is None or isinstance(promoted, int)),
                                       ("detail", detail, detail is None or isinstance(detail, Mapping))):
            if not expected:
                raise StagedCutoverError(f"state record {kind}/{key}: field {name}={value!r} is not "
                                         + ("a mapping" if name == "detail" else "an epoch-ms integer"))
        return cls(name=key, run_id=run_id, steps_done=tuple(s for s in steps if s in done),
                   started_at_ms=started if isinstance(started, int) else 0,
                   promoted_at_ms=promoted if isinstance(promoted, int) else None,
                   detail=dict(detail) if isinstance(detail, Mapping) else {})

    def with_step(self, kind: StateKind, step: str, now_ms: int, **detail: object) -> UnitPromotion:
        """This record with ``step`` done (idempotent); the ``promoted`` step stamps ``promoted_at_ms`` once."""
        steps = _steps_for(kind)
        if step not in steps:
            raise StagedCutoverError(f"{kind}/{self.name}: unknown step {step!r}; steps are {steps}")
        done = tuple(s for s in steps if s in self.steps_done or s == step)
        promoted_at = self.promoted_at_ms if self.promoted_at_ms is not None else (now_ms if step == PROMOTED else None)
        return UnitPromotion(self.name, self.run_id, done, self.started_at_ms or now_ms, promoted_at,
                             {**self.detail, **detail})


def _steps_for(kind: StateKind) -> tuple[str, ...]:
    if kind == GROUP_PROMOTION_KIND:
        return GROUP_STEPS
    if kind == TOPIC_PROMOTION_KIND:
        return TOPIC_STEPS
    raise StagedCutoverError(
        f"unknown promotion kind {kind}; expected {GROUP_PROMOTION_KIND} or {TOPIC_PROMOTION_KIND}")


def next_step(kind: StateKind, record: UnitPromotion | None) -> str | None:
    """The first step not yet done (invariant D); None when promoted. The resume point of the step table's walk
    (``core.cutover.step_table.plan_steps``), which the runner (``promotion.step_runner``) follows."""
    steps = _steps_for(kind)
    if record is not None and record.promoted:
        return None
    return plan_steps(str(kind), steps, record.steps_done if record is not None else ()).resume_at


def start_or_resume(kind: StateKind, name: str, stored: UnitPromotion | None, run_id: str,
                    now_ms: int) -> UnitPromotion:
    """The record a run works on: the stored one when resuming (keeps the first run's id and start), else a new one."""
    if stored is not None:
        return stored
    _steps_for(kind)
    return UnitPromotion(name=name, run_id=run_id, started_at_ms=now_ms)


def validate_selection(what: str, requested: Iterable[str], migrated: Iterable[str]) -> list[str]:
    """The requested groups/topics, de-duplicated and sorted; an unknown or empty selection is an error naming it."""
    wanted = sorted({r.strip() for r in requested if r and r.strip()})
    known = set(migrated)  # once: a set per name made the check quadratic (issue 36)
    if not wanted:
        raise StagedCutoverError(f"no {what} chosen: pick at least one of {sorted(known)[:SHOWN]}"
                                 f"{_more(len(known))}")
    unknown = [w for w in wanted if w not in known]
    if unknown:
        # bounded: a few of each, and how many more (4,000 names made a 65 KB message)
        raise StagedCutoverError(f"{what} {unknown[:SHOWN]}{_more(len(unknown))} are not part of this migration; "
                                 f"migrated {what}: {sorted(known)[:SHOWN]}{_more(len(known))}")
    return wanted


SHOWN = 5  # names a refusal lists before "and N more"


def _more(count: int) -> str:
    return f" and {count - SHOWN} more" if count > SHOWN else ""


@dataclass(frozen=True)
class GroupReadiness:
    group: str
    ready: bool
    reason: str


def group_readiness(groups: Iterable[str], source_members: Mapping[str, int],
                    last_commit_ms: Mapping[str, int | None], promoted: Iterable[str], now_ms: int,
                    quiet_ms: int) -> list[GroupReadiness]:
    """Which source groups can be promoted now: no members and no commit in the last ``quiet_ms``.

    A group missing from ``source_members`` was not described: it is not ready (never guess it is empty).
    """
    done = set(promoted)
    out = []
    for g in sorted(set(groups)):
        if g in done:
            out.append(GroupReadiness(g, False, "already promoted"))
        elif g not in source_members:
            out.append(GroupReadiness(g, False, "not described on the source"))
        elif source_members[g] > 0:
            out.append(GroupReadiness(g, False, f"{source_members[g]} member(s) on the source"))
        elif (last := last_commit_ms.get(g)) is not None and now_ms - last < quiet_ms:
            out.append(GroupReadiness(g, False, f"committed {now_ms - last} ms ago (< {quiet_ms} ms)"))
        else:
            out.append(GroupReadiness(g, True, "no members, no recent commit"))
    return out


def blocking_groups(topics: Iterable[str], readers: Mapping[str, Iterable[str]], promoted_groups: Iterable[str],
                    waived_groups: Iterable[str]) -> dict[str, list[str]]:
    """Per topic, the migrated groups reading it that are neither promoted nor waived (invariant B)."""
    cleared = set(promoted_groups) | set(waived_groups)
    out: dict[str, list[str]] = {}
    for topic in sorted(set(topics)):
        blockers = sorted(g for g, read in readers.items() if topic in set(read) and g not in cleared)
        if blockers:
            out[topic] = blockers
    return out


def check_topic_promotion(topics: Iterable[str], readers: Mapping[str, Iterable[str]],
                          promoted_groups: Iterable[str], waived_groups: Iterable[str]) -> None:
    """Refuse a topic promotion while a reading group is neither promoted nor waived, naming each such group."""
    blocked = blocking_groups(topics, readers, promoted_groups, waived_groups)
    if blocked:
        parts = "; ".join(f"topic {t} is read by unpromoted group(s) {', '.join(gs)}" for t, gs in blocked.items())
        raise StagedCutoverError(f"topic promotion refused: {parts}. Promote those groups first or waive them "
                                 "in the form (waived groups keep their destination offsets as they are)")


def groups_to_commit(groups: Iterable[str], promoted_groups: Iterable[str]) -> list[str]:
    """The groups a catch-up translation may still commit (invariant A): a promoted group's consumers own it."""
    done = set(promoted_groups)
    return sorted(g for g in set(groups) if g not in done)


def topics_to_copy(topics: Iterable[str], promoted_topics: Iterable[str]) -> list[str]:
    """The topics copy batches still cover (invariant C)."""
    done = set(promoted_topics)
    return sorted(t for t in set(topics) if t not in done)


def promoted_names(records: Mapping[str, Mapping[str, object]], kind: StateKind) -> list[str]:
    """Names whose stored promotion record of ``kind`` says promoted."""
    return sorted(k for k, v in records.items() if UnitPromotion.from_record(kind, k, v).promoted)


def fences_overtaken(fenced: Iterable[str], promoted: Iterable[str], still_recorded: Iterable[str]) -> list[str]:
    """The fences a run just put that must go again: their unit is promoted by now, or a promotion lifted their
    record while the run made the ACLs (fence keys; ``provision.fences.put_fences`` has the whole race)."""
    gone, recorded = set(promoted), set(still_recorded)
    return sorted(k for k in set(fenced) if k in gone or k not in recorded)
