"""The whole-migration promotion's records (kind ``promotion``) as stored in the state topic: the promoted mark,
each finished step, the final translation per group, the promoted topics and groups, and the quiesce gate's
last seen source end offsets.

The one reader and writer of the kind: the promotion steps, the readiness gates, the copy guard and the
``reset-promotion`` command all come here, so they agree on its keys (``core.common.state_records``: ``MIGRATION_KEY``
and the ``*_PREFIX`` keys).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from kafka_ferry.core.common.dates import iso_utc
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.common.state_records import (
    MIGRATION_KEY,
    PROMOTED_GROUP_PREFIX,
    PROMOTED_TOPIC_PREFIX,
    PROMOTION_KIND,
    QUIESCE_KEY,
    ROLLBACK_KIND,
    STEP_PREFIX,
    TRANSLATION_PREFIX,
    under,
)
from kafka_ferry.state.store import MigrationStateStore

PROMOTED = "promoted"


def promotion_records(store: MigrationStateStore) -> dict[str, dict[str, Any]]:
    """Every promotion record, by key (``stored_decisions`` and ``completed_steps`` read this snapshot)."""
    return store.read_kind(PROMOTION_KIND)


def promotion_status(store: MigrationStateStore) -> dict[str, Any] | None:
    """The migration's promoted mark (status, promoted_at_ms, topics, groups), or None before promotion."""
    return promotion_records(store).get(MIGRATION_KEY)


def completed_steps(records: Mapping[str, Mapping[str, Any]], steps: Iterable[str]) -> list[str]:
    """The ``steps`` (in their order) marked done in ``records``."""
    return [s for s in steps if step_done(records, s)]


def step_done(records: Mapping[str, Mapping[str, Any]], step: str) -> bool:
    return records.get(STEP_PREFIX + step, {}).get("status") == "done"


def save_step_done(store: MigrationStateStore, step: str, summary: dict[str, Any], duration_s: float) -> None:
    """Mark ``step`` done; written only after its effects are durable, so a resumed run skips it."""
    store.put(PROMOTION_KIND, STEP_PREFIX + step, {"status": "done", "finished_at_ms": int(time.time() * 1000),
                                                   "duration_s": round(duration_s, 3), "summary": summary})


def save_final_translation(store: MigrationStateStore, by_group: Mapping[str, list[dict[str, Any]]],
                           records: Mapping[str, Mapping[str, Any]]) -> None:
    """The final translation's decisions per group; a group of an earlier translation (in ``records``) that this
    one no longer has is deleted, so ``commit_offsets`` commits exactly this translation."""
    stale = [TRANSLATION_PREFIX + g for g in under(records, TRANSLATION_PREFIX) if g not in by_group]
    values = {TRANSLATION_PREFIX + g: {"decisions": rows} for g, rows in by_group.items()}
    store.put_many(PROMOTION_KIND, {**values, **{k: None for k in stale}})


def save_promoted(store: MigrationStateStore, topics: Mapping[str, str], groups: Iterable[str], now_ms: int) -> None:
    """The promoted mark with a record per promoted topic (source -> destination topic) and group."""
    groups = list(groups)
    records: dict[str, Any] = {PROMOTED_TOPIC_PREFIX + t: {"status": PROMOTED, "destination_topic": d,
                                                           "promoted_at_ms": now_ms} for t, d in topics.items()}
    records.update({PROMOTED_GROUP_PREFIX + g: {"status": PROMOTED, "promoted_at_ms": now_ms} for g in groups})
    records[MIGRATION_KEY] = {"status": PROMOTED, "promoted_at_ms": now_ms, "topics": list(topics),
                              "groups": sorted(groups)}
    store.put_many(PROMOTION_KIND, records)


def quiesce_mark(store: MigrationStateStore) -> dict[str, Any] | None:
    """The quiesce gate's last seen source end offsets (fingerprint) and since when (since_s), or None."""
    return promotion_records(store).get(QUIESCE_KEY)


def save_quiesce_mark(store: MigrationStateStore, fingerprint: str, since_s: float) -> None:
    store.put(PROMOTION_KIND, QUIESCE_KEY, {"fingerprint": fingerprint, "since_s": since_s})


class RollbackStillPossible(Permanent, RuntimeError):
    """A reset of a promoted migration whose rollback has not run would drop what the rollback needs; refused."""


def rollback_possible(store: MigrationStateStore, records: Mapping[str, Mapping[str, Any]] | None = None) -> bool:
    """Promoted, and no finished rollback recorded for this promotion (``state.rollback``'s ``migration`` record)."""
    status = (promotion_records(store) if records is None else records).get(MIGRATION_KEY) or {}
    if status.get("status") != PROMOTED:
        return False
    undone = store.read_kind(ROLLBACK_KIND).get(MIGRATION_KEY) or {}
    return not (undone.get("status") == "rolled-back" and undone.get("promoted_at_ms") == status.get("promoted_at_ms"))


def reset_promotion(store: MigrationStateStore, give_up_rollback: bool = False) -> list[str]:
    """Delete every promotion record (marker, steps, translations): a later promotion starts over.

    Refused (``RollbackStillPossible``, nothing deleted) while a rollback of the promotion is possible: the records
    are what the rollback reads (when the cutover was, which groups and topics went), so deleting them loses the way
    back. ``give_up_rollback`` says the rollback is given up knowingly. A finished rollback calls this to clear
    the mark (its own record says it is done, so nothing is refused)."""
    records = promotion_records(store)
    if not give_up_rollback and rollback_possible(store, records):
        raise RollbackStillPossible(
            f"migration state {store.topic}: the promotion of "
            f"{iso_utc((records.get(MIGRATION_KEY) or {}).get('promoted_at_ms'))} can still be rolled back, and a "
            "reset would delete what the rollback reads (the cutover and what it moved): refused, nothing was "
            "changed. To go back to the source: kafka-ferry rollback <spec> (kafka-ferry rollback-plan <spec> "
            "shows it first). To give the rollback up for good: kafka-ferry reset-promotion <spec> "
            "--give-up-rollback")
    keys = sorted(records)
    if keys:
        store.put_many(PROMOTION_KIND, {k: None for k in keys})
    return keys
