"""ACLs as plain values: what the migration's principals need on each cluster, grant hints, and fences.

Names follow Kafka's (`ResourceType`, `AclOperation`, `AclPermissionType`, `ResourcePatternType`), upper
case, so an entry reads like `kafka-acls --list` output and maps one-to-one onto the AdminClient's
`AclBinding`. Pure: no Kafka client here; `kafka_ferry.kafka.acls` turns entries into admin calls.

Why literal ACLs for the minimum: the migration's topics and groups are chosen by regexes, which Kafka
ACLs cannot express; the planned names are known before anything runs, and a literal grant never reaches
a topic created later by someone else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.offsets.mm2_wire import (
    HEARTBEATS_TOPIC,
    checkpoints_topic,
    offset_syncs_topic,
    remote_heartbeats_topic,
)

if TYPE_CHECKING:  # annotations only: the Kafka layer imports this module, and the spec imports pydantic
    from kafka_ferry.core.specs.spec import MigrationSpec

ANY_HOST = "*"
# Kafka protocol error codes (confluent-kafka's KafkaError codes for broker errors are the same numbers).
AUTHORIZATION_CODES = {29: "TOPIC", 30: "GROUP", 31: "CLUSTER", 53: "TRANSACTIONAL_ID"}
CLUSTER_RESOURCE = "kafka-cluster"


@dataclass(frozen=True, order=True)
class AclEntry:
    """One ACL: `permission` `operation` on `resource_type` `resource_name` (`pattern_type`) for `principal`."""

    principal: str
    resource_type: str
    resource_name: str
    operation: str
    permission: str = "ALLOW"
    pattern_type: str = "LITERAL"
    host: str = ANY_HOST

    def describe(self) -> str:
        pattern = "" if self.pattern_type == "LITERAL" else f" ({self.pattern_type})"
        return (f"{self.permission} {self.operation} on {self.resource_type} '{self.resource_name}'{pattern} "
                f"for {self.principal}")

    def covers(self, resource_type: str, name: str) -> bool:
        """True when this entry's resource pattern matches the named resource."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == "PREFIXED":
            return name.startswith(self.resource_name)
        return self.resource_name in (name, "*")


def principal_of(client_config: Mapping[str, object]) -> str | None:
    """The principal a connection authenticates as, when its config says (SASL); never reads a secret."""
    protocol = str(client_config.get("security.protocol", "PLAINTEXT")).upper()
    username = client_config.get("sasl.username")
    if protocol.startswith("SASL") and username:
        return f"User:{username}"
    if protocol == "PLAINTEXT":
        return "User:ANONYMOUS"
    return None


def grant_hint(principal: str | None, resource_type: str, resource_name: str, operation: str) -> str:
    """What to grant, as an admin would type it (`kafka-acls --add ...`)."""
    who = principal or "the connection's principal"
    entry = AclEntry(who, resource_type, resource_name, operation)
    return f"grant {entry.describe()}"


def grant_hint_for_code(code: int | None, principal: str | None,
                        needs: Mapping[str, tuple[str, str]] | None) -> str | None:
    """A grant hint for an authorization error code, or None for other errors.

    ``needs`` maps a resource type to the (ACL operation, resource name) the failed call needed of it.
    """
    resource_type = AUTHORIZATION_CODES.get(code) if code is not None else None
    if resource_type is None or needs is None or resource_type not in needs:
        return None  # not an authorization error, or the call did not say what it needs: no guess
    operation, name = needs[resource_type]
    return grant_hint(principal, resource_type, CLUSTER_RESOURCE if resource_type == "CLUSTER" else name, operation)


@dataclass(frozen=True)
class MinimumAcls:
    """The least-privilege ACLs of one migration, per cluster."""

    source: tuple[AclEntry, ...]
    destination: tuple[AclEntry, ...]

    def lines(self) -> list[str]:
        return ([f"source: {e.describe()}" for e in self.source]
                + [f"destination: {e.describe()}" for e in self.destination])


SOURCE_TOPIC_OPERATIONS = ("DESCRIBE", "DESCRIBE_CONFIGS", "READ")
# ``acls.migrate``: DescribeAcls on the source needs DESCRIBE on its cluster; on the destination, DescribeAcls (what is
# present) and CreateAcls need DESCRIBE and ALTER on its cluster (ALTER implies DESCRIBE to Kafka's authorizer: both
# are listed so the grant reads as what each call needs)
ACL_MIGRATION_SOURCE_OPERATIONS = ("DESCRIBE",)
ACL_MIGRATION_DESTINATION_OPERATIONS = ("DESCRIBE", "ALTER")
SOURCE_GROUP_OPERATIONS = ("DESCRIBE",)
MIRROR_TOPIC_OPERATIONS = ("CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALTER", "WRITE", "READ")
INTERNAL_TOPIC_OPERATIONS = ("CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "WRITE", "READ")
# The copy-back's progress and sync log on the source outlive the rollback: later catch-ups and promotions
# (``core.cutover.rollback_plan.across_rollback``), staged group rollbacks and the rollback plan read them. Without
# DESCRIBE the broker hides them, which looks like "no rollback ran"; so reading them is part of the minimum.
COPY_BACK_READ_OPERATIONS = ("DESCRIBE", "READ")
DESTINATION_GROUP_OPERATIONS = ("DESCRIBE", "READ")
# The tool's own consumers read by assign() and never commit, but librdkafka still looks up the
# coordinator of their group.id, which needs DESCRIBE on it. A test keeps this list in step with the code.
READER_GROUPS = ("kafka-ferry-reader", "kafka-ferry-range-reader", "kafka-ferry-state-reader", "kafka-ferry-resume")


def reader_groups(spec: MigrationSpec) -> tuple[str, ...]:
    return (*READER_GROUPS, f"kafka-ferry-copy.{spec.name}")


def _grants(principal: str, resource_type: str, names: Iterable[str], operations: Iterable[str]) -> list[AclEntry]:
    return [AclEntry(principal, resource_type, name, op) for name in sorted(set(names)) for op in operations]


def internal_topics(spec: MigrationSpec) -> dict[str, tuple[str, ...]]:
    """The migration's own topics per cluster: state, offset syncs, checkpoints, heartbeats."""
    syncs = offset_syncs_topic(spec.destination.alias)
    on_destination = [spec.state_topic_name, checkpoints_topic(spec.source.alias), HEARTBEATS_TOPIC,
                      remote_heartbeats_topic(spec.source.alias)]
    return {"source": (), "destination": (*on_destination, syncs)}


def rollback_internal_topics(spec: MigrationSpec) -> tuple[str, str]:
    """The topics a rollback creates and writes on the source: the copy-back's state topic and sync log."""
    return spec.copy_back_state_topic_name, offset_syncs_topic(spec.source.alias)


def minimum_acls(spec: MigrationSpec, source_principal: str, destination_principal: str,
                 source_topics: Iterable[str], groups: Iterable[str]) -> MinimumAcls:
    """Exactly what a catch-up and a promotion of these topics and groups need; nothing on the cluster, but what
    ``acls.fence`` and ``acls.migrate`` add (the ACL calls of the fences and of the ``migrate_acls`` task).

    Source: describe and read the topics, describe the groups (their committed offsets), describe and read
    the copy-back's two topics (``rollback_internal_topics``: this migration's own; a grant on a name that does
    not exist yet reaches nothing, and after a rollback they decide where groups resume). Destination:
    create, configure, grow, write and read back the mirror topics and the migration's own topics;
    describe groups and commit their offsets (READ on the group). On both, DESCRIBE on the tool's reader
    groups (coordinator lookups). Idempotent producers need no cluster
    ACL since Kafka 2.8 (WRITE on a topic implies IDEMPOTENT_WRITE).
    """
    source_topics = sorted(set(source_topics))
    groups = sorted(set(groups))
    mirrors = [spec.topics.rename.destination_topic(t) for t in source_topics]
    internal = internal_topics(spec)
    source = (_grants(source_principal, "TOPIC", source_topics, SOURCE_TOPIC_OPERATIONS)
              + _grants(source_principal, "GROUP", [*groups, *reader_groups(spec)], SOURCE_GROUP_OPERATIONS)
              + _grants(source_principal, "TOPIC", internal["source"], INTERNAL_TOPIC_OPERATIONS)
              + _grants(source_principal, "TOPIC", rollback_internal_topics(spec), COPY_BACK_READ_OPERATIONS))
    destination = (_grants(destination_principal, "TOPIC", mirrors, MIRROR_TOPIC_OPERATIONS)
                   + _grants(destination_principal, "TOPIC", internal["destination"], INTERNAL_TOPIC_OPERATIONS)
                   + _grants(destination_principal, "GROUP", groups, DESTINATION_GROUP_OPERATIONS)
                   + _grants(destination_principal, "GROUP", reader_groups(spec), ("DESCRIBE",)))
    if spec.acls.fence:  # list the ACLs that decide who to fence, and put and lift the fences
        destination += _grants(destination_principal, "CLUSTER", [CLUSTER_RESOURCE], ("DESCRIBE", "ALTER"))
    if spec.acls.migrate:  # migrate_acls: list the source's ACLs, list and create the destination's
        extra = acl_migration_acls(source_principal, destination_principal)
        source += extra.source
        destination += [e for e in extra.destination if e not in destination]
    return MinimumAcls(tuple(source), tuple(destination))


def acl_migration_acls(source_principal: str, destination_principal: str) -> MinimumAcls:
    """What the ``migrate_acls`` task (``acls.migrate``) needs beyond the copy's minimum: DESCRIBE on the source
    cluster (DescribeAcls), DESCRIBE and ALTER on the destination cluster (DescribeAcls, CreateAcls)."""
    return MinimumAcls(
        tuple(_grants(source_principal, "CLUSTER", [CLUSTER_RESOURCE], ACL_MIGRATION_SOURCE_OPERATIONS)),
        tuple(_grants(destination_principal, "CLUSTER", [CLUSTER_RESOURCE], ACL_MIGRATION_DESTINATION_OPERATIONS)))


# --- a rollback's ACLs: granted for the rollback only ---------------------------------------------------

# Decision: a separate set, never part of ``minimum_acls``. A rollback is rare and runs after a cutover; the
# catch-up only reads the source. Granting WRITE on the source topics and READ (commit) on the source groups
# for the migration's whole life would let a bug or a leaked credential write the tenant's production topics
# and move its consumers at any time. So an operator grants these before a rollback (the dry run lists them,
# the rollback checks them before any change and names what is missing) and may revoke them after.
ROLLBACK_SOURCE_TOPIC_OPERATIONS = ("WRITE",)  # DESCRIBE and READ (the tail read on resume): in the minimum already
ROLLBACK_SOURCE_GROUP_OPERATIONS = ("READ",)  # commit offsets; DESCRIBE (membership): in the minimum already
# create and write the copy-back's topics; DESCRIBE and READ: in the minimum (read after the rollback too)
ROLLBACK_INTERNAL_TOPIC_OPERATIONS = tuple(op for op in INTERNAL_TOPIC_OPERATIONS
                                           if op not in COPY_BACK_READ_OPERATIONS)
ROLLBACK_REASONS = {
    ("TOPIC", "source"): "copy back the records produced on the destination after the cutover (idempotent "
                         "producer: WRITE implies IDEMPOTENT_WRITE since Kafka 2.8)",
    ("GROUP", "group"): "commit the group's translated offsets on the source",
    ("TOPIC", "state"): "the copy-back's progress and lease (its own state topic, created on the source)",
    ("TOPIC", "syncs"): "the copy-back's offset syncs (created on the source; groups resume from them)",
}


@dataclass(frozen=True)
class RollbackAcls:
    """The ACLs a rollback needs beyond ``minimum_acls``, all on the source, each with why (``reasons``)."""

    source: tuple[AclEntry, ...]
    reasons: Mapping[AclEntry, str]

    def lines(self) -> list[str]:
        return [f"source: {e.describe()} ({self.reasons[e]})" for e in self.source]


def rollback_acls(spec: MigrationSpec, source_principal: str, source_topics: Iterable[str],
                  groups: Iterable[str]) -> RollbackAcls:
    """Exactly what a rollback of these source topics and groups needs beyond the catch-up's minimum.

    ``source_topics``: the topics copied back into (none for a staged group's rollback: nothing is copied back,
    so the copy-back's own topics are not needed either); ``groups``: the groups committed on the source. The
    destination side needs nothing new: the copy-back reads the mirrors (READ, and DESCRIBE on the
    ``kafka-ferry-copy.<name>`` group) and fences as a promotion does (``minimum_acls``). All literal.
    """
    source_topics, groups = sorted(set(source_topics)), sorted(set(groups))
    reasons: dict[AclEntry, str] = {}
    for entry in _grants(source_principal, "TOPIC", source_topics, ROLLBACK_SOURCE_TOPIC_OPERATIONS):
        reasons[entry] = ROLLBACK_REASONS[("TOPIC", "source")]
    for entry in _grants(source_principal, "GROUP", groups, ROLLBACK_SOURCE_GROUP_OPERATIONS):
        reasons[entry] = ROLLBACK_REASONS[("GROUP", "group")]
    if source_topics:
        state, syncs = rollback_internal_topics(spec)
        for name, why in ((state, "state"), (syncs, "syncs")):
            for entry in _grants(source_principal, "TOPIC", [name], ROLLBACK_INTERNAL_TOPIC_OPERATIONS):
                reasons[entry] = ROLLBACK_REASONS[("TOPIC", why)]
    return RollbackAcls(tuple(reasons), reasons)


# --- fences: keep others off a mirror topic or group until it is promoted -------------------------------

WILDCARD_PRINCIPAL = "User:*"  # Kafka's only wildcard principal (the authorizer matches no other `Type:*`)


class FenceRefused(Permanent, ValueError):
    """A fence cannot be put without denying everyone, the migration included: the message names the ALLOW."""


def _refuse_wildcard(allows: list[AclEntry], operation: str, resource_type: str, name: str) -> None:
    """A DENY for `User:*` would deny every principal, the migration's own too (DENY wins over ALLOW): refuse."""
    wild = sorted(e for e in allows if e.principal == WILDCARD_PRINCIPAL)
    if wild:
        raise FenceRefused(
            f"cannot fence {resource_type} '{name}': {wild[0].describe()} lets every principal {operation} it, "
            f"and the only fence for that is a DENY {operation} for {WILDCARD_PRINCIPAL}, which would also deny "
            "the migration's own principal. Replace that ALLOW with ALLOWs naming each principal that needs it "
            "(the fence then denies each of them until promotion), or set acls.fence: false. Nothing was changed.")


def group_readers(group: str, migration_principal: str | None, existing: Iterable[AclEntry]) -> list[str]:
    """The principals an existing ACL lets read (join, commit) the group, but the migration's own (it commits
    the translated offsets, which needs READ on the group). An ALLOW for `User:*` raises FenceRefused."""
    allows = [e for e in existing
              if e.permission == "ALLOW" and e.operation in ("READ", "ALL") and e.covers("GROUP", group)
              and e.principal != migration_principal]
    _refuse_wildcard(allows, "READ", "GROUP", group)
    return sorted({e.principal for e in allows})


def group_read_fence(group: str, consumer_principals: Iterable[str]) -> tuple[AclEntry, ...]:
    """DENY READ on the group for its consumers' principals: an early consumer cannot join or commit."""
    return tuple(AclEntry(p, "GROUP", group, "READ", permission="DENY") for p in sorted(set(consumer_principals)))


def topic_write_fence(topic: str, migration_principal: str, existing: Iterable[AclEntry]) -> tuple[AclEntry, ...]:
    """DENY WRITE on the topic for every other principal an existing ACL lets write it.

    A DENY for `User:*` would also stop the migration (DENY wins over ALLOW), so the fence names each
    principal that could write: ALLOW WRITE or ALL on a pattern covering the topic; an ALLOW for `User:*`
    raises FenceRefused (it cannot be fenced by naming principals).
    """
    allows = [e for e in existing
              if e.permission == "ALLOW" and e.operation in ("WRITE", "ALL") and e.covers("TOPIC", topic)
              and e.principal != migration_principal]
    _refuse_wildcard(allows, "WRITE", "TOPIC", topic)
    return tuple(AclEntry(p, "TOPIC", topic, "WRITE", permission="DENY") for p in sorted({e.principal
                                                                                          for e in allows}))


def fence_to_own(wanted: Iterable[AclEntry], existing: Iterable[AclEntry], recorded: Iterable[AclEntry]
                 ) -> tuple[AclEntry, ...]:
    """The fence entries the migration owns: those it recorded before, and those that do not exist yet.

    An identical binding that exists and was not recorded was put by someone else (an admin's DENY): it
    already does the fence's work, and it is never recorded, so no lift deletes it. A recorded one that
    exists is the migration's own, put by an earlier run (record first, then create).
    """
    existing, recorded = set(existing), set(recorded)
    return tuple(sorted(e for e in set(wanted) if e in recorded or e not in existing))
