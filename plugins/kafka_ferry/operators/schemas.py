"""The `migrate_schemas` task: subjects, versions, references and settings of the migrated topics move from the
source registry to the destination's before any mirror topic exists (stage: `schemas.schemas`).

Idempotent: the stage plans from the destination's current state, so a rerun registers nothing new; the id
map (source id -> destination id) is stored in the migration's state topic as `schema_id` records, and only
entries not stored yet are written. Refusals that no retry can change (a conflict, a destination that ignores
IMPORT mode in preserve mode, a malformed connection) fail the task at once; an unreachable registry keeps the
task's retries.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from kafka_ferry.airflow_native.announce import decode_measured
from kafka_ferry.copy.plan import planned_files, work_dir
from kafka_ferry.copy.report import write_report
from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.schemas.decode_faults import MigrationFaultsFound, skip_reason, verdict
from kafka_ferry.hooks.schema_registry import SchemaRegistryHook
from kafka_ferry.operators.base import DryRunOperator
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.promotion.guard import assert_not_promoted
from kafka_ferry.registry.client import SchemaRegistry
from kafka_ferry.reports.publish import publish_batch_run
from kafka_ferry.schemas.decode_check import check_decoding
from kafka_ferry.schemas.schemas import SchemaMigrationError, migrate_schemas
from kafka_ferry.schemas.serialized_fields import decide_from_registry
from kafka_ferry.state.promotion import promotion_status
from kafka_ferry.state.schema_ids import id_map_storer, stored_id_map
from kafka_ferry.state.serialized_fields import fields_by_destination, store_decisions


class MigrateSchemasOperator(DryRunOperator):
    """Migrates the schemas of the spec's `schema_registry` section; `dry_run` returns the diff only.

    :param dry_run: see ``DryRunOperator``: plan and report only, change nothing.
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``.
    """

    ui_color = "#e8dcf4"

    @cached_property
    def settings(self):
        if self.spec.schema_registry is None:
            raise SchemaMigrationError(f"{self.spec_path}: the spec has no 'schema_registry' section")
        return self.spec.schema_registry

    def registries(self) -> tuple[SchemaRegistry, SchemaRegistry]:
        return registry(self.settings.source_connection_id), registry(self.settings.destination_connection_id)

    def migrated_topics(self) -> dict[str, str]:
        """Source topic -> destination topic, for every topic the spec selects (their subjects follow them)."""
        selected = select_topics(self.spec, self.source_cluster.list_topic_names())
        return {t: self.spec.topics.rename.destination_topic(t) for t in selected}

    @fail_fast
    def execute(self, context: Any) -> dict:
        dry_run = self.is_dry_run
        if not dry_run:
            self.state_store.ensure_topic()  # the id map's home; the first run of a migration may come here first
            self.record_owner()  # with a tenants file: this spec file owns the state topic from now on
            # after promotion the destination registry belongs to the tenant
            assert_not_promoted(self.state_store, self.spec_path)
        source, destination = self.registries()
        try:
            storer = None if dry_run else id_map_storer(self.state_store, self.settings.mode,
                                                        str(context.get("run_id", "")))
            topics = self.migrated_topics()
            result = migrate_schemas(source, destination, self.settings, topics, dry_run=dry_run,
                                     store_id_map=storer)
            # Which fields of each topic carry the wire format: what the copy rewrites and the check decodes.
            fields = decide_from_registry(source, self.settings, topics)
            if not dry_run:
                store_decisions(self.state_store, fields, str(context.get("run_id", "")))
        finally:  # SchemaMigrationError, SchemaRegistryRefused: Permanent, fail_fast fails the task once
            source.close()
            destination.close()
        return {**result.as_dict(),  # the stage logged the plan, line by line
                "serialized_fields": {t: {"fields": d.fields, "reason": d.reason} for t, d in sorted(fields.items())}}


def registry(conn_id: str) -> SchemaRegistry:
    return SchemaRegistryHook(conn_id).get_conn()  # a malformed connection: RegistryConnectionError, Permanent


class DecodeCheckOperator(DryRunOperator):
    """After a catch-up batch: decode what the copy wrote on the destination against the destination registry
    (stage: `schemas.decode_check`). The counts and the first failures go into the batch report, so the run's
    page (written by `translate_offsets`, next) shows them; `decode_check: enforce` fails the run on a failure.

    Moves only its own marks (kind `decode-check`): a rerun checks nothing twice, a run cut short rechecks.
    Skipped in a dry run (it would move marks) and once the migration is promoted (the tenant writes there).

    :param dry_run: skip the check (it would move the check's marks); a bool or a template.
    :param plan_task_id: task id of the planning task whose XCom summary names the batch, its plan and its report.
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``. The trigger rule defaults
        to ``none_failed_min_one_success``.
    """

    ui_color = "#e8dcf4"

    def __init__(self, *, plan_task_id: str = "plan_copy", **kwargs) -> None:
        kwargs.setdefault("trigger_rule", "none_failed_min_one_success")  # like the report it follows
        super().__init__(**kwargs)
        self.plan_task_id = plan_task_id

    @fail_fast
    def execute(self, context: Any) -> dict:
        settings = self.spec.schema_registry
        skipped = skip_reason(settings.decode_check if settings is not None else None, self.is_dry_run,
                              lambda: promotion_status(self.state_store))
        if skipped is not None or settings is None:  # no registry section: skip_reason says "off"
            return {"skipped": skipped}
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id) or {}
        destination = registry(settings.destination_connection_id)
        source = registry(settings.source_connection_id)  # to tell the migration's faults from the source's
        id_map = stored_id_map(self.state_store) if settings.mode == "remap" else None
        try:
            report = check_decoding(self.destination_cluster, destination, self.state_store,
                                    str(plan.get("batch_id") or context.get("run_id") or ""),
                                    fields=fields_by_destination(self.spec, self.state_store), source=source,
                                    id_map=id_map)
        finally:  # SchemaRegistryRefused is Permanent: fail_fast fails the task once
            destination.close()
            source.close()
        result = report.as_dict()
        decode_measured(self.spec.name, result)  # before a failure below: a dashboard sees the failures too
        # derived from the spec and the batch id, never a path from XCom (copy.plan.planned_files)
        report_path = planned_files(self.spec.name, plan)[1] if plan.get("report_path") else None
        if report_path is not None and report_path.exists():  # the page translate_offsets writes shows it
            write_report({**json.loads(report_path.read_text()), "decode_check": result}, report_path)
        failure = verdict(report.migration_faults, report.failed,
                          report.describe_failures() if report.failed else "", settings.decode_check)
        if isinstance(failure, MigrationFaultsFound) and report_path is not None and report_path.exists():
            # no later task of this run writes the page: the failure goes on it now
            page = {**json.loads(report_path.read_text()), "failure": str(failure)}
            publish_batch_run(self.spec, work_dir(self.spec.name), str(context.get("run_id") or page.get("batch_id")),
                              page, [], [])
        if failure is not None:
            raise failure  # Permanent: fail_fast fails the task once
        return result
