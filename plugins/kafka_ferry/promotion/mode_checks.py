"""The pre-flight's refusals of a mode by the migration's state, free of Airflow (``operators.provision`` calls
them): a state topic of another shape, a promoted migration (every mode but the rollbacks, naming the rollback), a
promotion of a migration nothing was copied for (naming catch-up), and the staged modes' own checks, made before
provisioning writes anything. Reads only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.cutover.staged_cutover import check_topic_promotion, validate_selection
from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.core.specs.trigger_form import (
    GROUPS_FIELD,
    PROMOTE,
    PROMOTE_GROUPS,
    PROMOTE_TOPICS,
    TOPICS_FIELD,
    WAIVE_FIELD,
    names,
)
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.promotion.guard import assert_not_promoted
from kafka_ferry.promotion.units import MigrationUnits, check_staged_units
from kafka_ferry.state.progress import migrated_groups, read_progress
from kafka_ferry.state.staged_cutover import promoted_groups, promoted_topics
from kafka_ferry.state.store import MigrationStateStore

log = logging.getLogger(__name__)


class NothingCopiedYet(Permanent, RuntimeError):
    """A promotion of a migration no catch-up run copied: nothing to promote yet (the same run is refused again)."""


@dataclass(frozen=True)
class StateCheck:
    exists: bool  # the state topic exists (of the right shape)
    state: Mapping[Any, Any]  # its records, read for the promotion modes only (else empty)


def check_state(spec: MigrationSpec, store: MigrationStateStore, spec_path: str, mode: str,
                rollback: bool) -> StateCheck:
    """The state topic's refusals for ``mode``: one of another shape (always), a promoted migration (every mode but
    the rollbacks), and a promotion of a migration nothing was copied for (naming catch-up)."""
    exists = store.check_topic()  # one of another shape is refused before any change
    if rollback:
        return StateCheck(exists, {})
    promoting = mode in (PROMOTE, PROMOTE_GROUPS, PROMOTE_TOPICS)
    state = store.read_all() if exists and promoting else {}  # what was copied and promoted
    if exists:
        assert_not_promoted(store, spec_path, refused=f"mode {mode!r} is refused")
    if promoting and not (state and read_progress(store, state)):
        raise NothingCopiedYet(
            f"mode {mode!r} is refused: migration {spec.name!r}: nothing was copied yet (no copy progress "
            f"in state topic {spec.state_topic_name}), so there is nothing to promote; run mode catch-up "
            f"first (until the lag is small), then mode {mode!r}")
    return StateCheck(exists, state)


def check_staged(spec: MigrationSpec, source: KafkaCluster, store: MigrationStateStore, mode: str,
                 params: Mapping[str, Any], state: Mapping[Any, Any], planned: Mapping[str, Sequence[str]],
                 units: MigrationUnits | None = None) -> bool:
    """The checks ``promote_groups`` / ``promote_topics`` make before acting, made before provisioning writes
    anything (the tasks make them again: a run can race another): unknown names, a topic read by a group neither
    promoted nor waived, a coupled unit the step would split (``promotion.units``). True when every name is
    promoted already: the run is a no-op, and ``choose_route`` skips the rest of it.

    The groups this run's provisioning would record (``planned``) count as migrated already."""
    readers = {**migrated_groups(store, state), **planned} if state else dict(planned)
    done_groups, done_topics = (promoted_groups(store, state), promoted_topics(store, state)) if state else ([], [])
    if mode == PROMOTE_GROUPS:
        chosen = validate_selection("groups", names(params.get(GROUPS_FIELD)), readers)
        todo = [g for g in chosen if g not in done_groups]
        if not todo:
            log.info("group(s) %s promoted already: nothing to do", ", ".join(chosen))
        elif units is not None:
            check_staged_units(spec, units, PROMOTE_GROUPS, groups=todo, promoted_topics=done_topics,
                               promoted_groups=done_groups)
        return not todo
    chosen = validate_selection("topics", names(params.get(TOPICS_FIELD)),
                                select_topics(spec, source.list_topic_names()))
    waived = names(params.get(WAIVE_FIELD))
    if waived:
        validate_selection("waived groups", waived, readers)
    todo = [t for t in chosen if t not in done_topics]
    if not todo:
        log.info("topic(s) %s promoted already: nothing to do", ", ".join(chosen))
        return True
    check_topic_promotion(todo, readers, done_groups, waived)
    if units is not None:
        check_staged_units(spec, units, PROMOTE_TOPICS, topics=todo, promoted_topics=done_topics,
                           promoted_groups=done_groups)
    return False
