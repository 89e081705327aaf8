"""A rollback's records in the migration state (kind ``rollback``), and the copy-back's own state topic.

Keys of the ``rollback`` kind (on the destination's state topic, like the promotion's):
  migration                  status "rolled-back", promoted_at_ms of the promotion it undid, rolled_back_at_ms
  step/<step>                status "done", promoted_at_ms (a step counts only for the promotion it undoes), summary
  resume/<group>             the group's decided source offsets (one row per partition, with method and reason)

The copy-back is a copy like the forward one, destination -> source, so it keeps its progress where it writes:
``<state topic>.rollback`` on the source (the partition copier writes progress to its own destination's state
topic), keyed by destination partition. Its offset syncs go to ``mm2-offset-syncs.<source alias>.internal`` on
the source.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_ferry.core.acls.acl_plan import COPY_BACK_READ_OPERATIONS, grant_hint
from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.common.state_records import ROLLBACK_KIND, WRITTEN_AT, StateSnapshot, under
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.state.progress import read_progress
from kafka_ferry.state.store import MigrationStateStore

ROLLED_BACK = "rolled-back"
MIGRATION = "migration"
STEP = "step/"
RESUME = "resume/"


def copy_back_state_topic(spec: MigrationSpec) -> str:
    return spec.copy_back_state_topic_name


def copy_back_store(spec: MigrationSpec, source: Cluster) -> MigrationStateStore:
    """The copy-back's progress store, on the source (where the copy-back writes)."""
    return MigrationStateStore(source, copy_back_state_topic(spec))


class CopyBackNotVisible(Permanent, RuntimeError):
    """The destination's state records a copy-back, but the source topic holding its progress or syncs is hidden or
    empty: deciding without it would resume groups past copied-back records. No retry grants the ACL."""


def recorded_copy_back(store: MigrationStateStore, state: StateSnapshot | None = None) -> dict[str, int]:
    """What the copy-backs recorded on the destination say the source holds: the most ``partitions`` and
    ``records_copied`` of a done ``copy_back`` step, the whole migration's or a staged topic's (zeros when none ran).

    Why the step summaries: a copy-back with nothing to copy creates no topic on the source, so only a recorded
    step that copied tells an absent topic from a hidden one."""
    records = ROLLBACK_KIND.records(state) if state is not None else rollback_records(store)
    whole = records.get(STEP + "copy_back") or {}
    summaries = [whole.get("summary") or {}] if whole.get("status") == "done" else []
    summaries += [(r.get("steps") or {}).get("copy_back", {}).get("summary") or {}
                  for r in under(records, TOPIC).values()]
    return {key: max([int(s.get(key) or 0) for s in summaries], default=0)
            for key in ("partitions", "records_copied")}


def refuse_unseen_copy_back(source: Cluster, store: MigrationStateStore, topic: str, holds: str,
                            recorded: int, what: str) -> None:
    """Raise ``CopyBackNotVisible`` naming ``topic`` and the ACL to grant, when the destination records ``recorded``
    (> 0) ``what`` copied back but the source's ``topic`` (its ``holds``) shows none; else nothing."""
    if recorded <= 0:
        return
    grants = " and ".join(grant_hint(source.principal, "TOPIC", topic, op) for op in COPY_BACK_READ_OPERATIONS)
    raise CopyBackNotVisible(
        f"the destination's state topic {store.topic} records a rollback's copy-back ({recorded} {what}), but the "
        f"source topic '{topic}' that holds its {holds} is not visible to the source principal or reads empty: "
        f"{grants} (part of the minimum ACLs, core.acls.acl_plan.minimum_acls; not one of the rollback-only ones to "
        "revoke). Without it groups would resume past the copied-back records; nothing was decided or changed.")


def copy_back_progress(spec: MigrationSpec, source: Cluster, store: MigrationStateStore,
                       state: StateSnapshot | None = None) -> dict[tuple[str, int], PartitionProgress]:
    """The copy-back's progress per destination partition (empty before any copy-back; creates nothing).

    ``store``: the destination's (``state``: its ``read_all()``, when read already); a copy-back it records whose
    progress the source does not show raises ``CopyBackNotVisible`` (a missing DESCRIBE hides a topic: that must
    not read as "no rollback ran")."""
    topic = copy_back_state_topic(spec)
    progress = read_progress(copy_back_store(spec, source)) if topic in source.list_topic_names() else {}
    if not progress:
        refuse_unseen_copy_back(source, store, topic, "progress",
                                recorded_copy_back(store, state)["partitions"], "partition(s)")
    return progress


def rollback_records(store: MigrationStateStore) -> dict[str, dict[str, Any]]:
    return store.read_kind(ROLLBACK_KIND)


def rollback_status(store: MigrationStateStore) -> dict[str, Any] | None:
    return rollback_records(store).get(MIGRATION)


def steps_done(store: MigrationStateStore, promoted_at_ms: int | None) -> list[str]:
    """Steps done for the promotion that started at ``promoted_at_ms`` (a rollback of an earlier one is not it)."""
    return [s for s, v in under(rollback_records(store), STEP).items()
            if v.get("status") == "done" and v.get("promoted_at_ms") == promoted_at_ms]


def save_step(store: MigrationStateStore, step: str, promoted_at_ms: int | None, summary: Mapping[str, Any],
              finished_at_ms: int) -> None:
    store.put(ROLLBACK_KIND, STEP + step, {"status": "done", "promoted_at_ms": promoted_at_ms,
                                           "finished_at_ms": finished_at_ms, "summary": dict(summary)})


def save_resumes(store: MigrationStateStore, resumes: Mapping[str, list[dict[str, Any]]]) -> None:
    store.put_many(ROLLBACK_KIND, {RESUME + g: {"partitions": rows} for g, rows in resumes.items()})


def stored_resumes(store: MigrationStateStore) -> dict[str, list[dict[str, Any]]]:
    return {g: v.get("partitions", []) for g, v in under(rollback_records(store), RESUME).items()}


def mark_rolled_back(store: MigrationStateStore, promoted_at_ms: int | None, now_ms: int, topics: list[str],
                     groups: list[str]) -> None:
    store.put(ROLLBACK_KIND, MIGRATION, {"status": ROLLED_BACK, "promoted_at_ms": promoted_at_ms,
                                         "rolled_back_at_ms": now_ms, "topics": topics, "groups": groups})


GROUP = "group/"  # group/<group>: a staged group's rollback (status, promoted_at_ms, rolled_back_at_ms, offsets)


def group_rollback(store: MigrationStateStore, group: str) -> dict[str, Any] | None:
    """A staged group's rollback record as it was saved (without the store's write time)."""
    record = rollback_records(store).get(GROUP + group)
    return None if record is None else {k: v for k, v in record.items() if k != WRITTEN_AT}


def save_group_rollback(store: MigrationStateStore, group: str, record: Mapping[str, Any]) -> None:
    store.put(ROLLBACK_KIND, GROUP + group, dict(record))


def group_resume(store: MigrationStateStore, group: str, promoted_at_ms: int | None) -> list[dict[str, Any]] | None:
    """A staged group's decided source offsets, when decided for this promotion of it."""
    record = rollback_records(store).get(RESUME + group)
    if record is None or record.get("promoted_at_ms") != promoted_at_ms:
        return None
    partitions: list[dict[str, Any]] = record.get("partitions", [])
    return partitions


def save_group_resume(store: MigrationStateStore, group: str, rows: list[dict[str, Any]],
                      promoted_at_ms: int | None) -> None:
    store.put(ROLLBACK_KIND, RESUME + group, {"partitions": rows, "promoted_at_ms": promoted_at_ms})


TOPIC = "topic/"  # topic/<topic>: a staged topic's rollback (status, promoted_at_ms, steps, groups, rolled_back_at_ms)


def topic_rollback(store: MigrationStateStore, topic: str) -> dict[str, Any] | None:
    """A staged topic's rollback record as it was saved (without the store's write time)."""
    record = rollback_records(store).get(TOPIC + topic)
    return None if record is None else {k: v for k, v in record.items() if k != WRITTEN_AT}


def topic_rollbacks(store: MigrationStateStore, state: StateSnapshot | None = None) -> dict[str, dict[str, Any]]:
    """Every staged topic's rollback record, by topic (one read of the state topic, or of ``state``)."""
    records = ROLLBACK_KIND.records(state) if state is not None else rollback_records(store)
    return {t: {k: v for k, v in r.items() if k != WRITTEN_AT} for t, r in under(records, TOPIC).items()}


def save_topic_rollback(store: MigrationStateStore, topic: str, record: Mapping[str, Any]) -> None:
    store.put(ROLLBACK_KIND, TOPIC + topic, dict(record))


def unit_rollbacks(store: MigrationStateStore) -> dict[str, dict[str, dict[str, Any]]]:
    """Every staged unit's rollback record: {"groups": {group: record}, "topics": {topic: record}}."""
    records = rollback_records(store)
    return {"groups": under(records, GROUP), "topics": under(records, TOPIC)}
