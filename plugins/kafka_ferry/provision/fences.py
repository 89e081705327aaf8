"""Fences on the destination while a staged cutover runs (``acls.fence``): put at provisioning, lifted at promotion.

Why: before its group is promoted, a consumer started early on the destination would read from wherever the
destination group stands, not from the translated offset; before its topic is promoted, a stray producer
on the mirror would break the copy's exactly-once resume and the offset maps. So, until promotion:
  group  every principal an ACL lets read the group (but the migration's) is denied READ on it
  topic  every principal an ACL lets write the mirror (but the migration's) is denied WRITE on it
DENY wins over ALLOW in Kafka's authorizer, and a literal DENY names one group or topic, so nothing else
changes. Each unit's fence is recorded in the state topic (kind ``fence``, `state.fences`) before it is created, so a
promotion lifts exactly what was put, never a DENY the tenant made. The ACLs on a unit are described first:
a fence entry identical to one already there (an admin's DENY) is left alone and never recorded, so it
survives the lift. A unit any principal may use through an ALLOW for ``User:*`` is refused (FenceRefused)
before any change: its only fence would be a DENY for ``User:*``, which denies the migration too. Both
directions are idempotent.

A destination without an authorizer has nothing to fence with: the fences are skipped with a warning
(pre-flight says so too), and the migration runs as without ``acls.fence``.
"""

from __future__ import annotations

import logging
from dataclasses import asdict

from kafka_ferry.core.acls.acl_plan import AclEntry, fence_to_own, group_read_fence, group_readers, topic_write_fence
from kafka_ferry.core.cutover.staged_cutover import fences_overtaken
from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.acls import create_acls, delete_acls, describe_acls
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.state.fences import forget_fence, group_fence_key, recorded_fences, save_fences, topic_fence_key
from kafka_ferry.state.progress import migrated_groups
from kafka_ferry.state.protocol import StateReader
from kafka_ferry.state.staged_cutover import promoted_groups, promoted_topics
from kafka_ferry.state.store import MigrationStateStore

log = logging.getLogger(__name__)

SECURITY_DISABLED = 54  # Kafka's error code when the cluster has no authorizer


def has_authorizer(destination: KafkaCluster) -> bool:
    """False when the destination answers ACL calls with SECURITY_DISABLED (no authorizer configured)."""
    try:
        describe_acls(destination, "GROUP", "kafka-ferry-probe", pattern_type="LITERAL")
    except KafkaClusterError as exc:
        if exc.code == SECURITY_DISABLED:
            return False
        raise
    return True


def wanted_fences(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                  store: StateReader) -> dict[str, tuple[AclEntry, ...]]:
    """The fence of every unit not promoted yet, by fence key (a unit nobody else may read or write has none)."""
    return {key: entries for key, (entries, _) in _fence_plans(spec, source, destination, store).items()}


def _fence_plans(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster, store: StateReader
                 ) -> dict[str, tuple[tuple[AclEntry, ...], list[AclEntry]]]:
    """Per fence key: the fence's entries and the ACLs on the unit now (FenceRefused for a wildcard ALLOW)."""
    state = store.read_all()
    groups = sorted(set(migrated_groups(store, state)) - set(promoted_groups(store, state)))
    topics = sorted(set(select_topics(spec, source.list_topic_names())) - set(promoted_topics(store, state)))
    return fence_plans_of(spec, destination, topics, groups)


def check_fenceable(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                    store: MigrationStateStore, groups: list[str]) -> None:
    """Pre-flight: FenceRefused when a unit not promoted yet would need a DENY for `User:*`. Reads only (the
    state topic too, and only when it exists: a migration that never ran has promoted nothing)."""
    exists = spec.state_topic_name in destination.describe_topics([spec.state_topic_name])
    state = store.read_all() if exists else {}
    fence_plans_of(spec, destination,
                   sorted(set(select_topics(spec, source.list_topic_names())) - set(promoted_topics(store, state))),
                   sorted(set(groups) - set(promoted_groups(store, state))))


def fence_plans_of(spec: MigrationSpec, destination: KafkaCluster, topics: list[str], groups: list[str]
                   ) -> dict[str, tuple[tuple[AclEntry, ...], list[AclEntry]]]:
    """The fences of these source topics' mirrors and these groups, read-only (pre-flight asks this too: a
    fence that would need a DENY for `User:*` is refused there, before anything changes)."""
    migration = destination.principal
    out = {}
    for group in groups:
        existing = describe_acls(destination, "GROUP", group, pattern_type="MATCH")
        out[group_fence_key(group)] = (group_read_fence(group, group_readers(group, migration, existing)), existing)
    for topic in topics:
        mirror = spec.topics.rename.destination_topic(topic)
        existing = describe_acls(destination, "TOPIC", mirror, pattern_type="MATCH")
        # no principal (a cluster without authentication): no ACL names the migration, as none names ""
        out[topic_fence_key(mirror)] = (topic_write_fence(mirror, migration or "", existing), existing)
    return {key: plan for key, plan in out.items() if plan[0]}


def put_fences(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
               store: MigrationStateStore) -> dict[str, list[str]]:
    """Fence every unpromoted group and mirror topic; returns what each fence denies (for the task's log)."""
    if not has_authorizer(destination):
        log.warning("acls.fence is on but the destination has no authorizer: no fences (consumers and producers "
                    "are not kept off the destination before promotion)")
        return {}
    plans = _fence_plans(spec, source, destination, store)  # every unit planned (or refused) before any change
    recorded = recorded_fences(store)
    owned, lines = {}, {}
    for key, (entries, existing) in plans.items():
        before = [AclEntry(**e) for e in (recorded.get(key) or {}).get("entries", [])]
        owned[key] = fence_to_own(entries, existing, before)
        lines[key] = [e.describe() if e in owned[key] else f"{e.describe()} (put by someone else: left alone)"
                      for e in entries]
    # Record first: a crash after create leaves a fence its promotion still knows to lift. Only what the
    # migration owns is recorded: a binding that was there before is never lifted.
    written = {key: _merged(recorded.get(key), entries) for key, entries in owned.items() if entries}
    save_fences(store, written)
    existing_now = {e for _, existing in plans.values() for e in existing}
    create_acls(destination, [e for entries in owned.values() for e in entries if e not in existing_now])
    # A unit promoted while this run fenced it must not stay fenced: its consumers or producers would be denied on
    # the destination for good. (One DAG's runs never overlap, max_active_runs=1, but the state may be changed by
    # another deployment or a direct call.) Each side writes its own mark first and reads the other's after:
    #   this run   fence record, ACLs, then reads the promotions and the fence records again (below)
    #   promotion  lifts (reads the record, deletes ACLs and record), stores "promoted", lifts again
    #              (``lift_after_promoted``)
    # If the promotion's second lift read before our record was written, its "promoted" mark was stored before
    # that too, so the read below sees it. If its first lift deleted our record before our ACLs existed, the
    # read below finds the record gone. Either way the ACLs this run made for that unit (only owned ones: the
    # record holds nothing else) are deleted here.
    for key in overtaken_fences(spec, store, written):
        lines.pop(key, None)
        delete_acls(destination, [AclEntry(**e) for e in written[key]])
        forget_fence(store, key)
        log.warning("fence %s: its unit was promoted while this run fenced it: not kept", key)
    for key, described in lines.items():
        log.info("fence %s: %s", key, "; ".join(described))
    return lines


def overtaken_fences(spec: MigrationSpec, store: MigrationStateStore, fence_keys) -> list[str]:
    """The fences among ``fence_keys`` a promotion overtook: the unit is promoted by now, or its record was lifted."""
    state = store.read_all()
    promoted = {group_fence_key(g) for g in promoted_groups(store, state)}
    promoted |= {topic_fence_key(spec.topics.rename.destination_topic(t)) for t in promoted_topics(store, state)}
    return fences_overtaken(fence_keys, promoted, recorded_fences(store, state))


def lift_after_promoted(destination: KafkaCluster, store: MigrationStateStore, key: str) -> list[str]:
    """The promotion's second look, once its promoted mark is stored: a fence a catch-up run recorded while the
    promotion ran (after its first lift) goes too. Nothing recorded: nothing done (promoting again is a no-op)."""
    lifted = lift_fence(destination, store, key)
    if lifted:
        log.warning("fence %s was put by a run that overlapped its promotion: lifted again", key)
    return lifted


def lift_fence(destination: KafkaCluster, store: MigrationStateStore, key: str) -> list[str]:
    """Delete the ACLs the unit's fence put, then its record; nothing recorded, nothing deleted."""
    record = recorded_fences(store).get(key)
    if record is None:
        return []
    entries = [AclEntry(**e) for e in record["entries"]]
    delete_acls(destination, entries)
    forget_fence(store, key)
    log.info("fence %s lifted: %s", key, "; ".join(e.describe() for e in entries))
    return [e.describe() for e in entries]


def release_from_fences(store: MigrationStateStore, kept: list[AclEntry]) -> list[str]:
    """ACL migration wants these bindings on the destination for good: a fence that recorded one of them no
    longer owns it, so no lift deletes a DENY the source holds. Returns the released entries, described."""
    kept_set, released, updates = set(kept), [], {}
    for key, record in sorted(recorded_fences(store).items()):
        entries = [AclEntry(**e) for e in record.get("entries", [])]
        remaining = [e for e in entries if e not in kept_set]
        if len(remaining) < len(entries):
            released += [f"{key}: {e.describe()}" for e in entries if e in kept_set]
            updates[key] = [asdict(e) for e in remaining] if remaining else None
    if updates:
        save_fences(store, updates)
        log.info("fence entries now the tenant's (ACL migration keeps them): %s", "; ".join(released))
    return released


def lift_all_fences(destination: KafkaCluster, store: MigrationStateStore) -> list[str]:
    """The whole migration is promoted: every recorded fence goes."""
    return [line for key in sorted(recorded_fences(store)) for line in lift_fence(destination, store, key)]


def _merged(recorded: dict | None, entries: tuple[AclEntry, ...]) -> list[dict]:
    """A fence put again keeps what it put before (a reader whose ALLOW went away is still denied until lifted)."""
    known = {AclEntry(**e) for e in (recorded or {}).get("entries", [])}
    return [asdict(e) for e in sorted(known | set(entries))]
