"""ACL migration as a task: the migrated topics' and groups' ACLs, renamed, never widened (dry run: diff only)."""

from __future__ import annotations

from typing import Any

from kafka_ferry.core.flags import parse_bool
from kafka_ferry.operators.base import MigrationOperator
from kafka_ferry.provision.acls import migrate_acls


class MigrateAclsOperator(MigrationOperator):
    """Creates on the destination the ACLs the source holds on migrated topics and groups.

    Idempotent (present entries are left alone); entries that would grant more than the source are refused and
    listed in the result (`refused`), never created. ``dry_run`` returns the diff without changing anything.

    :param dry_run: plan and report only, change nothing (a bool, or a template such as the run form's ``dry_run``,
        read with ``parse_bool`` at run time).
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``.
    """

    template_fields = (*MigrationOperator.template_fields, "dry_run")

    def __init__(self, *, dry_run: bool | str = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.dry_run = dry_run

    def execute(self, context: Any) -> dict:
        dry_run = parse_bool(self.dry_run)
        plan = migrate_acls(self.spec, self.source_cluster, self.destination_cluster, self.state_store, dry_run=dry_run)
        return {**plan.summary(), "dry_run": dry_run, "diff": plan.diff_lines()}
