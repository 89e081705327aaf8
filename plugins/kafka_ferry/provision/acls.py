"""ACL migration against live clusters: read both sides' ACLs, plan (core.acls.acl_migration), create the new ones.

Needs more than the copy's minimum ACLs: DESCRIBE on the source cluster (to list ACLs) and ALTER on the
destination cluster (to create them).
"""

from __future__ import annotations

import logging

from kafka_ferry.core.acls.acl_migration import AclMigrationPlan, plan_acl_migration
from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.acls import create_acls, describe_acls
from kafka_ferry.provision.fences import release_from_fences
from kafka_ferry.state.progress import migrated_groups
from kafka_ferry.state.store import MigrationStateStore

log = logging.getLogger(__name__)


def plan_migration_acls(spec: MigrationSpec, source, destination, store: MigrationStateStore) -> AclMigrationPlan:
    """The ACL diff for the spec's topics and the groups provisioning recorded."""
    topics = select_topics(spec, source.list_topic_names())
    return plan_acl_migration(describe_acls(source), topics, migrated_groups(store),
                              spec.topics.rename.destination_topic, spec.acls.principals, describe_acls(destination))


def migrate_acls(spec: MigrationSpec, source, destination, store: MigrationStateStore,
                 dry_run: bool = False) -> AclMigrationPlan:
    """Plan, log the diff, and (unless dry_run) create the missing entries; refusals are logged, never applied."""
    plan = plan_migration_acls(spec, source, destination, store)
    for line in plan.diff_lines():
        (log.warning if line.startswith("!") else log.info)("ACL %s", line)
    if not dry_run:
        # A DENY the source holds may be the very binding a fence put: from now on it is the tenant's, not
        # the fence's, so the promotion's lift leaves it.
        release_from_fences(store, [*plan.present, *plan.create])
        create_acls(destination, plan.create)
    return plan
