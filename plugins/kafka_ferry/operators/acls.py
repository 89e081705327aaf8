"""ACL migration as a task: the migrated topics' and groups' ACLs, renamed, never widened (dry run: diff only)."""

from __future__ import annotations

from typing import Any

from kafka_ferry.operators.base import DryRunOperator
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.provision.acls import migrate_acls


class MigrateAclsOperator(DryRunOperator):
    """Creates on the destination the ACLs the source holds on migrated topics and groups.

    Idempotent (present entries are left alone); entries that would grant more than the source are refused and
    listed in the result (`refused`), never created. What it created, found present and refused is recorded in the
    state topic (kind ``acl-migration``, keyed by the run id; not by a dry run, nor by a run that changed nothing).
    ``dry_run`` returns the diff without changing anything. On the DAG's route (``acls.migrate``: the
    ``migrate_acls`` task after ``provision_groups``, whose recorded groups it reads); a principal that may not list
    or create ACLs fails it once, naming the grant and ``acls.migrate: false``.

    :param dry_run: see ``DryRunOperator``: plan and report only, change nothing.
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``.
    """

    @fail_fast
    def execute(self, context: Any) -> dict:
        dry_run = self.is_dry_run
        plan = migrate_acls(self.spec, self.source_cluster, self.destination_cluster, self.state_store,
                            dry_run=dry_run, run_id=str(context.get("run_id") or self.task_id))
        return {**plan.summary(), "dry_run": dry_run, "diff": plan.diff_lines()}
