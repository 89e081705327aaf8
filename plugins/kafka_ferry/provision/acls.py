"""ACL migration against live clusters: read both sides' ACLs, plan (core.acls.acl_migration), create the new ones.

Needs more than the copy's minimum ACLs: DESCRIBE on the source cluster (to list ACLs) and ALTER on the
destination cluster (to create them).
"""

from __future__ import annotations

import logging

from kafka_ferry.core.acls.acl_migration import AclMigrationPlan, plan_acl_migration
from kafka_ferry.core.acls.acl_plan import (
    ACL_MIGRATION_DESTINATION_OPERATIONS,
    ACL_MIGRATION_SOURCE_OPERATIONS,
    AUTHORIZATION_CODES,
    CLUSTER_RESOURCE,
    grant_hint,
)
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.acls import AclsPartlyCreated, cluster_operations, create_acls, describe_acls
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.provision.fences import release_from_fences
from kafka_ferry.state.acl_migration import record_acl_migration
from kafka_ferry.state.progress import migrated_groups
from kafka_ferry.state.store import MigrationStateStore

log = logging.getLogger(__name__)

WAY_OUT = ("or, to migrate no ACLs, set acls.migrate: false in the spec (the topics, groups and schemas migrate "
           "without them)")


class AclMigrationNotAuthorized(Permanent, RuntimeError):
    """A connection's principal may not list or create ACLs: no retry grants it, so the task fails once, naming the
    grant (the Kafka error's hint) and the way out (``WAY_OUT``)."""


def check_acl_grants(source, destination) -> None:
    """Refuse, before listing anything, when a connection's principal lacks a cluster grant the ACL migration needs
    (``core.acls.acl_plan.acl_migration_acls``): without DESCRIBE a listing is empty rather than refused, and the
    migration would find nothing to migrate and say nothing. Kafka lists the cluster's operations only to a
    principal that may DESCRIBE it (``kafka.acls.cluster_operations``): no list, no grant of the ones needed."""
    missing = []
    for cluster, operations in ((source, ACL_MIGRATION_SOURCE_OPERATIONS),
                                (destination, ACL_MIGRATION_DESTINATION_OPERATIONS)):
        may = cluster_operations(cluster) or set()
        missing += [f"{grant_hint(cluster.principal, 'CLUSTER', CLUSTER_RESOURCE, op)} on connection '{cluster.name}'"
                    for op in operations if op not in may]
    if missing:
        raise AclMigrationNotAuthorized(f"ACL migration (acls.migrate) not authorized: {'; '.join(missing)} (to list "
                                        f"and create ACLs); nothing was changed. Grant what is missing, {WAY_OUT}")


def _not_authorized(exc: KafkaClusterError, created: bool) -> AclMigrationNotAuthorized | None:
    if exc.code not in AUTHORIZATION_CODES:
        return None
    changed = "the ACLs listed in the acl-migration record were created" if created else "nothing was changed"
    return AclMigrationNotAuthorized(f"ACL migration (acls.migrate) not authorized: {exc}; {changed}. Grant it, "
                                     f"{WAY_OUT}")


def plan_migration_acls(spec: MigrationSpec, source, destination, store: MigrationStateStore) -> AclMigrationPlan:
    """The ACL diff for the spec's topics and the groups provisioning recorded."""
    topics = select_topics(spec, source.list_topic_names())
    return plan_acl_migration(describe_acls(source), topics, migrated_groups(store),
                              spec.topics.rename.destination_topic, spec.acls.principals, describe_acls(destination))


def migrate_acls(spec: MigrationSpec, source, destination, store: MigrationStateStore,
                 dry_run: bool = False, run_id: str = "manual") -> AclMigrationPlan:
    """Plan, log the diff, and (unless dry_run) create the missing entries; refusals are logged, never applied.
    A principal without the cluster grants is refused first (``check_acl_grants``), in a dry run too.

    Not in a dry run, what the run created, found present and refused is recorded (kind ``acl-migration``, under
    ``run_id``; ``state.acl_migration``) after the create, listing only what the destination accepted: when the
    create fails part way, the entries it did create are recorded before the error is raised, and none it did not.
    A run that creates nothing and refuses the same as the newest record writes nothing."""
    check_acl_grants(source, destination)
    try:
        plan = plan_migration_acls(spec, source, destination, store)
    except KafkaClusterError as exc:
        raise _not_authorized(exc, created=False) or exc from None
    for line in plan.diff_lines():
        (log.warning if line.startswith("!") else log.info)("ACL %s", line)
    if dry_run:
        return plan
    # A DENY the source holds may be the very binding a fence put: from now on it is the tenant's, not
    # the fence's, so the promotion's lift leaves it.
    release_from_fences(store, [*plan.present, *plan.create])
    try:
        created = create_acls(destination, plan.create)
    except AclsPartlyCreated as exc:
        record_acl_migration(store, run_id, exc.created, plan)
        raise _not_authorized(exc, created=bool(exc.created)) or exc from None
    record_acl_migration(store, run_id, created, plan)
    return plan
