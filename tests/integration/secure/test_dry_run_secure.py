"""A dry run on clusters with authorizers (``acls.fence``): the fences are planned and shown, no ACL is put.

Every catch-up task runs with ``dry_run`` as the DAG renders it for ``mode: dry-run``; both clusters' topics,
configs, records, groups and ACLs are snapshotted before and compared after.
"""

from __future__ import annotations

import pytest
from test_least_privilege import PARTITIONS, secure_migration
from test_shared_destination import snapshot

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.kafka.acls import create_acls
from kafka_ferry.operators.copy import PlanCopyBatchOperator
from kafka_ferry.operators.provision import (
    MigrationPreflightOperator,
    ProvisionMirrorGroupsOperator,
    ProvisionMirrorTopicsOperator,
)
from kafka_ferry.operators.translation import TranslateOffsetsOperator

pytestmark = pytest.mark.integration


def test_a_dry_run_with_fencing_plans_the_fences_and_puts_no_acl(private, tmp_path, work_dir):
    m = secure_migration(private, tmp_path, "dryfence", acls={"fence": True})
    group, topics, spec_path = m["group"], m["topics"], m["spec_path"]
    reader = private.create_principal("destination", f"{m['p']}-reader")[0]
    create_acls(private.cluster("destination"), [AclEntry(f"User:{reader}", "GROUP", group, "READ")])
    before = snapshot(private, m["p"])

    context = {"params": {"mode": "dry-run"}}
    diff = MigrationPreflightOperator(task_id="preflight", spec_path=spec_path).execute(context)
    planned = ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=spec_path,
                                            dry_run=True).execute(context)
    groups = ProvisionMirrorGroupsOperator(task_id="provision_groups", spec_path=spec_path,
                                           dry_run=True).execute(context)
    batch = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path, dry_run=True).execute(context)
    translated = TranslateOffsetsOperator(task_id="translate_offsets", spec_path=spec_path,
                                          dry_run=True).execute(context)

    assert snapshot(private, m["p"]) == before  # no fence ACL, no state or MM2 topic, no mirror, no group offset
    assert diff["mode"] == "dry-run" and diff["fencing"] == "on"
    # the least-privilege principal may not see __transaction_state: said, and only declared units count
    coupling = diff["coupled_units"]
    assert not coupling["transaction_log_read"] and coupling["units"] == [], coupling
    assert coupling["transaction_log"].startswith("__transaction_state could not be read"), coupling
    assert "Declare them in the spec (coupling.units)" in coupling["transaction_log"]
    assert sorted(planned["ownership"]["create"]) == sorted(topics)
    assert groups["dry_run"] is True and groups["migrated"] == {group: sorted(topics)}
    assert any(reader in line and "DENY" in line for line in groups["fences"][f"GROUP:{group}"])
    assert (batch["dry_run"], batch["offsets"]) == (True, 40 * PARTITIONS * len(topics))
    assert translated["dry_run"] is True
