"""Fences on the destination while a staged cutover runs (``acls.fence``): put at provisioning, lifted at promotion.

Why: before its group is promoted, a consumer started early on the destination would read from wherever the
destination group stands, not from the translated offset; before its topic is promoted, a stray producer
on the mirror would break the copy's exactly-once resume and the offset maps. So, until promotion:
  group  every principal an ACL lets read the group (but the migration's) is denied READ on it
  topic  every principal an ACL lets write the mirror (but the migration's) is denied WRITE on it
DENY wins over ALLOW in Kafka's authorizer, and a literal DENY names one group or topic, so nothing else
changes. Each unit's fence is recorded in the state topic (kind ``fence``) before it is created, so a
promotion lifts exactly what was put, never a DENY the tenant made. Both directions are idempotent.

A destination without an authorizer has nothing to fence with: the fences are skipped with a warning
(pre-flight says so too), and the migration runs as without ``acls.fence``.
"""

from __future__ import annotations

import logging
from dataclasses import asdict

from kafka_ferry.core.acl_plan import AclEntry, group_read_fence, group_readers, topic_write_fence
from kafka_ferry.core.provisioning_plan import select_topics
from kafka_ferry.core.spec import MigrationSpec
from kafka_ferry.core.staged_cutover import fences_overtaken
from kafka_ferry.core.state_records import FENCE_KIND
from kafka_ferry.kafka.acls import create_acls, delete_acls, describe_acls
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.promotion.staged_state import promoted_groups, promoted_topics
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import migrated_groups

log = logging.getLogger(__name__)

SECURITY_DISABLED = 54  # Kafka's error code when the cluster has no authorizer


def group_fence_key(group: str) -> str:
    return f"GROUP:{group}"


def topic_fence_key(mirror_topic: str) -> str:
    return f"TOPIC:{mirror_topic}"


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
                  store: MigrationStateStore) -> dict[str, tuple[AclEntry, ...]]:
    """The fence of every unit not promoted yet, by fence key (a unit nobody else may read or write has none)."""
    migration = destination.principal
    state = store.read_all()
    groups = sorted(set(migrated_groups(store, state)) - set(promoted_groups(store, state)))
    topics = sorted(set(select_topics(spec, source.list_topic_names())) - set(promoted_topics(store, state)))
    out = {}
    for group in groups:
        existing = describe_acls(destination, "GROUP", group, pattern_type="MATCH")
        out[group_fence_key(group)] = group_read_fence(group, group_readers(group, migration, existing))
    for topic in topics:
        mirror = spec.topics.rename.destination_topic(topic)
        existing = describe_acls(destination, "TOPIC", mirror, pattern_type="MATCH")
        out[topic_fence_key(mirror)] = topic_write_fence(mirror, migration, existing)
    return {key: entries for key, entries in out.items() if entries}


def put_fences(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
               store: MigrationStateStore) -> dict[str, list[str]]:
    """Fence every unpromoted group and mirror topic; returns what each fence denies (for the task's log)."""
    if not has_authorizer(destination):
        log.warning("acls.fence is on but the destination has no authorizer: no fences (consumers and producers "
                    "are not kept off the destination before promotion)")
        return {}
    wanted = wanted_fences(spec, source, destination, store)
    recorded = FENCE_KIND.records(store.read_all())
    # Record first: a crash after create leaves a fence its promotion still knows to lift.
    written = {key: _merged(recorded.get(key), entries) for key, entries in wanted.items()}
    store.put_many(FENCE_KIND, {key: {"entries": entries} for key, entries in written.items()})
    create_acls(destination, [e for entries in wanted.values() for e in entries])
    # A unit promoted while this run fenced it must not stay fenced: its consumers or producers would be denied on
    # the destination for good. (One DAG's runs never overlap, max_active_runs=1, but the state may be changed by
    # another deployment or a direct call.) Each side writes its own mark first and reads the other's after:
    #   this run   fence record, ACLs, then reads the promotions and the fence records again (below)
    #   promotion  lifts (reads the record, deletes ACLs and record), stores "promoted", lifts again
    #              (``lift_after_promoted``)
    # If the promotion's second lift read before our record was written, its "promoted" mark was stored before
    # that too, so the read below sees it. If its first lift deleted our record before our ACLs existed, the
    # read below finds the record gone. Either way the ACLs this run made for that unit are deleted here.
    for key in overtaken_fences(spec, store, wanted):
        wanted.pop(key)
        delete_acls(destination, [AclEntry(**e) for e in written[key]])
        store.put(FENCE_KIND, key, None)
        log.warning("fence %s: its unit was promoted while this run fenced it: not kept", key)
    for key, entries in wanted.items():
        log.info("fence %s: %s", key, "; ".join(e.describe() for e in entries))
    return {key: [e.describe() for e in entries] for key, entries in wanted.items()}


def overtaken_fences(spec: MigrationSpec, store: MigrationStateStore, fence_keys) -> list[str]:
    """The fences among ``fence_keys`` a promotion overtook: the unit is promoted by now, or its record was lifted."""
    state = store.read_all()
    promoted = {group_fence_key(g) for g in promoted_groups(store, state)}
    promoted |= {topic_fence_key(spec.topics.rename.destination_topic(t)) for t in promoted_topics(store, state)}
    return fences_overtaken(fence_keys, promoted, FENCE_KIND.records(state))


def lift_after_promoted(destination: KafkaCluster, store: MigrationStateStore, key: str) -> list[str]:
    """The promotion's second look, once its promoted mark is stored: a fence a catch-up run recorded while the
    promotion ran (after its first lift) goes too. Nothing recorded: nothing done (promoting again is a no-op)."""
    lifted = lift_fence(destination, store, key)
    if lifted:
        log.warning("fence %s was put by a run that overlapped its promotion: lifted again", key)
    return lifted


def lift_fence(destination: KafkaCluster, store: MigrationStateStore, key: str) -> list[str]:
    """Delete the ACLs the unit's fence put, then its record; nothing recorded, nothing deleted."""
    record = store.read_kind(FENCE_KIND).get(key)
    if record is None:
        return []
    entries = [AclEntry(**e) for e in record["entries"]]
    delete_acls(destination, entries)
    store.put(FENCE_KIND, key, None)
    log.info("fence %s lifted: %s", key, "; ".join(e.describe() for e in entries))
    return [e.describe() for e in entries]


def lift_all_fences(destination: KafkaCluster, store: MigrationStateStore) -> list[str]:
    """The whole migration is promoted: every recorded fence goes."""
    return [line for key in sorted(store.read_kind(FENCE_KIND)) for line in lift_fence(destination, store, key)]


def _merged(recorded: dict | None, entries: tuple[AclEntry, ...]) -> list[dict]:
    """A fence put again keeps what it put before (a reader whose ALLOW went away is still denied until lifted)."""
    known = {AclEntry(**e) for e in (recorded or {}).get("entries", [])}
    return [asdict(e) for e in sorted(known | set(entries))]
