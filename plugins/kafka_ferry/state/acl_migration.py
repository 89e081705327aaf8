"""The ACL migration's records (kind ``acl-migration``, ``core.acls.acl_record``): what a run created on the
destination, found present and refused. Written by ``provision.acls.migrate_acls`` after its create (never in a dry
run); read by the evidence bundle."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from kafka_ferry.core.acls.acl_migration import AclMigrationPlan
from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.acls.acl_record import run_record
from kafka_ferry.core.common.state_records import ACL_MIGRATION_KIND
from kafka_ferry.state.protocol import StateStore


def record_acl_migration(store: StateStore, run_id: str, created: Iterable[AclEntry], plan: AclMigrationPlan,
                         now_ms: int | None = None) -> dict[str, Any] | None:
    """Record what this run created (only entries the destination accepted) with the plan's present count and
    refusals; returns the record written, or None when it would add nothing (``core.acls.acl_record.run_record``)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    record = run_record(run_id, created, len(plan.present), plan.refused, now_ms, store.read_kind(ACL_MIGRATION_KIND))
    if record is not None:
        store.put(ACL_MIGRATION_KIND, run_id, record)
    return record


def acl_migration_records(store: StateStore) -> dict[str, dict[str, Any]]:
    return store.read_kind(ACL_MIGRATION_KIND)
