"""The package's floors, top to bottom: the one table the import test checks and the README's picture shows.

A module may import its own floor and the floors below, never one above, and no two folders may import each
other, directly or round a loop (``tests/unit/test_import_graph.py``). The README's architecture picture is
``picture()``, pasted between its ``layers`` markers; the same test fails when the two differ. Print it with
``python -m kafka_ferry.layers``.

``MODULES`` names every module of the package, so a new module is placed (and seen) on purpose: the same test fails
when one is missing here.

Imports nothing: it is data about the package, read by tests and docs.
"""

from __future__ import annotations

from dataclasses import dataclass
from textwrap import wrap


@dataclass(frozen=True)
class Floor:
    name: str
    # folder (``name/``) or top-level module (``name.py``) -> what it holds, one line of the picture each
    parts: tuple[tuple[str, str], ...]

    @property
    def packages(self) -> tuple[str, ...]:
        """The part names as an import names them (``copy/`` -> ``copy``, ``plugin.py`` -> ``plugin``)."""
        return tuple(part.removesuffix("/").removesuffix(".py") for part, _ in self.parts)


FLOORS: tuple[Floor, ...] = (
    Floor("airflow edge", (
        ("dag_factory.py", "one DAG per spec: preflight, schemas, provisioning, copy batches, translation"),
        ("dag_promotion.py", "the promotion run: sensors, final copy, translate, commit, reconcile, mark"),
        ("plugin.py", "the Airflow plugin: report pages"),
        ("provider_info.py", "what Airflow's providers manager reads: the schemaregistry connection type, its form "
                             "fields, the hooks"),
        ("task_support.py", "what every task shares: spec, clients, state store, the deterministic-failure policy"),
        ("process_tree.py", "ends a tree of processes a task or the command started, orphans included"),
        ("hooks/", "a Connection -> a client, nothing more: KafkaClusterHook.get_conn is a KafkaCluster, "
                   "SchemaRegistryHook a registry client"),
        ("operators/", "thin adapters of the folders below to Airflow tasks"),
        ("sensors/", "promotion gates (lag, quiesced, groups inactive), deferring to triggers/"),
        ("triggers/", "the async side of the sensors; primitives only"),
        ("airflow_native/", "what Airflow shows of a migration: topics as Assets (events through per-migration "
                            "aliases), OpenLineage of the copy and promotion tasks, metrics through Stats"),
        ("cli/", "the kafka-ferry command: runs a spec's own DAG (dag.test), status, reset-promotion; "
                 "spec_reference.py (docs/spec-reference.md from the spec model)"),
    )),
    Floor("promotion", (
        ("promotion/", "readiness gates, steps.py (the whole migration's step table), commit.py (commits group "
                       "offsets), reconcile.py, guard, promotion_report.py; staged cutover: group.py and topic.py "
                       "(a group's or a topic's own step table), group_readiness.py"),
    )),
    Floor("translation", (
        ("translation/", "offset syncs, MM2 checkpoints, translate.py (decides through core.offsets.offset_decisions; "
                         "commits only when asked)"),
    )),
    Floor("copy", (
        ("copy/", "plan.py (CopyPlan, the one plan type), planning.py (from stored progress + source offsets), "
                  "spark_job.py (what spark-submit or Spark Connect runs), runner.py, partition_copier.py (why "
                  "delivery is exact: delivery.py), lease.py, catch_up.py (batches until caught up), "
                  "throttle.py (the rate limit's pacing), backlog.py (backlog, rate and ETA of a run), "
                  "live_progress.py (a running batch's page), jvm_archive.py"),
    )),
    Floor("provisioning and schemas", (
        ("provision/", "provision.py (mirror topics and groups), topic_ownership.py (own only what it creates or "
                       "adopts), fences.py (staged-cutover ACL fences), acls.py (ACL migration)"),
        ("schemas/", "schemas.py (subjects, versions, ids between registries), serialized_fields.py (which fields "
                     "carry the registry wire format), decode_check.py"),
    )),
    Floor("state", (
        ("state/", "store.py (the migration's state topic, only through declared kinds) and the one typed reader "
                   "and writer of each kind: progress.py (copy progress, migrated groups), promotion.py (the "
                   "promoted mark, step marks, final translation), staged_cutover.py (group and topic "
                   "promotions), offset_decisions.py (the final translation's decisions), batches.py, gaps.py, "
                   "fences.py, "
                   "schema_ids.py, serialized_fields.py, topic_ownership.py, time_plans.py, decode_marks.py, "
                   "group_activity.py, backlog.py, acl_migration.py"),
    )),
    Floor("clients", (
        ("kafka/", "cluster.py (KafkaCluster: the one Kafka client), waiting.py, reads.py (bounded reads), "
                   "errors.py, acls.py, configs.py"),
        ("registry/", "the Schema Registry client (confluent-kafka's SchemaRegistryClient + the calls it lacks)"),
        ("reports/", "the per-run HTML report and lag chart (matplotlib)"),
        ("storage/", "workdir.py: the work dir (plans, reports, offset maps, pages) as a local directory or an "
                     "ObjectStoragePath URL through an Airflow connection; what must stay local"),
    )),
    Floor("core", (
        ("core/", "no Airflow, Kafka or Spark, one subpackage per concern: common/ (the error base, state record "
                  "kinds, cluster descriptions), specs/ (the spec, its checks, the tenants file, the trigger form), "
                  "offsets/ (MM2 wire codecs, sync policy, translation and decisions, provenance), schemas/, "
                  "batches/ (ranges, windows, rates, the copy lease), acls/, provisioning/ (plans, topic ownership, "
                  "time fidelity), cutover/ (routes, step tables, staged cutover, rollback plans, who may cut "
                  "over), units/ (coupling, Streams applications), observability/ (asset and metric names)"),
        ("layers.py", "this table"),
    )),
)

# Every module of the package (``__init__.py`` aside), by its path: a module added without its line here fails
# ``tests/unit/test_import_graph.py`` (so does a line naming a module that is gone). Where a module sits says what it
# may import: its folder's floor above.
MODULES: tuple[str, ...] = tuple("""
dag_factory.py dag_promotion.py layers.py plugin.py process_tree.py provider_info.py task_support.py
airflow_native/announce.py airflow_native/assets.py airflow_native/lineage.py airflow_native/metrics.py
cli/__main__.py cli/as_json.py cli/checkpoint.py cli/checks.py cli/commands.py cli/evidence.py cli/interrupt.py
cli/progress.py cli/spec_reference.py cli/summary.py
copy/backlog.py copy/batch.py copy/batch_runner.py copy/catch_up.py copy/connect_engine.py copy/copier_settings.py
copy/copy_failures.py copy/credentials.py copy/delivery.py copy/destination_tail.py copy/faults.py copy/jvm_archive.py
copy/lease.py copy/live_progress.py copy/packaging.py copy/partition_copier.py copy/plan.py copy/planning.py
copy/range_copy.py copy/report.py copy/runner.py copy/spark_home.py copy/spark_job.py copy/sync_writer.py
copy/throttle.py
core/acls/acl_migration.py core/acls/acl_plan.py core/acls/acl_record.py core/batches/backlog_eta.py
core/batches/batch_planning.py
core/batches/batch_window.py core/batches/copy_lease.py core/batches/copy_rate.py core/batches/driver_jvm.py
core/batches/live_progress.py core/batches/progress.py core/batches/rate_limit.py core/batches/spark_credentials.py
core/common/cluster_model.py core/common/dates.py core/common/failures.py core/common/flags.py
core/common/java_client_config.py core/common/kafka_wire.py core/common/state_records.py
core/cutover/authority.py core/cutover/evidence.py
core/cutover/rollback_plan.py core/cutover/routes.py core/cutover/staged_cutover.py core/cutover/step_names.py
core/cutover/step_table.py core/observability/kafka_assets.py core/observability/metrics_plan.py
core/offsets/groups_ahead.py core/offsets/mm2_wire.py core/offsets/offset_decisions.py
core/offsets/offset_fetch_wire.py core/offsets/offset_sync_policy.py core/offsets/offset_translation.py
core/offsets/provenance.py
core/offsets/spark_checkpoint.py core/provisioning/provisioning_plan.py core/provisioning/time_fidelity.py
core/provisioning/topic_ownership.py core/schemas/decode_faults.py core/schemas/protobuf_schema.py
core/schemas/schema_compat.py core/schemas/schema_decode.py core/schemas/schema_forms.py
core/schemas/schema_id_reversal.py core/schemas/schema_plan.py core/schemas/schema_wire.py
core/schemas/serialized_fields.py core/specs/connection_types.py core/specs/patterns.py core/specs/selection_check.py
core/specs/spec.py core/specs/spec_check.py core/specs/spec_source.py core/specs/tenants.py core/specs/trigger_form.py
core/units/coupling.py core/units/streams_apps.py core/units/transaction_log.py
hooks/evidence_signing.py hooks/kafka_cluster.py hooks/schema_registry.py
kafka/acls.py kafka/bootstrap.py kafka/call_count.py kafka/client_log.py kafka/cluster.py kafka/configs.py
kafka/errors.py kafka/offset_fetch.py kafka/protocol.py kafka/reads.py kafka/streams_groups.py
kafka/transaction_log.py kafka/waiting.py
operators/acls.py operators/authority.py operators/base.py operators/copy.py operators/copy_failures.py
operators/evidence.py operators/failures.py operators/promotion.py operators/provision.py operators/rollback.py
operators/schemas.py operators/spark_checkpoints.py operators/staged_promotion.py operators/translation.py
promotion/commit.py promotion/digest.py promotion/evidence.py promotion/group.py promotion/group_readiness.py
promotion/group_rollback.py promotion/guard.py promotion/mode_checks.py promotion/promotion_report.py
promotion/readiness.py promotion/reconcile.py promotion/rollback.py promotion/rollback_rights.py
promotion/rollback_schema_ids.py promotion/step_runner.py promotion/steps.py promotion/topic.py
promotion/topic_rollback.py promotion/units.py
provision/acls.py provision/fences.py provision/preflight.py provision/provision.py provision/streams_apps.py
provision/topic_ownership.py
registry/client.py registry/protocol.py
reports/chart.py reports/publish.py reports/render.py reports/unit_status.py
schemas/decode_check.py schemas/schemas.py schemas/serialized_fields.py
sensors/promotion_sensors.py
state/acl_migration.py state/backlog.py state/batches.py state/decode_marks.py state/evidence_key.py state/fences.py
state/gaps.py state/group_activity.py state/offset_decisions.py state/progress.py state/promotion.py state/protocol.py
state/rollback.py state/schema_ids.py state/serialized_fields.py state/staged_cutover.py state/store.py
state/time_plans.py state/topic_ownership.py
storage/private.py storage/workdir.py
translation/offset_map.py translation/spark_checkpoint.py translation/sync_log.py translation/translate.py
triggers/promotion_triggers.py
""".split())

# floor number per package: the bottom floor is 1, so "above" is "greater"
FLOOR: dict[str, int] = {package: len(FLOORS) - i for i, floor in enumerate(FLOORS) for package in floor.packages}
FLOOR_NAME: dict[int, str] = {len(FLOORS) - i: floor.name for i, floor in enumerate(FLOORS)}

_NAME_WIDTH, _PART_WIDTH, _WIDTH = 26, 18, 118


def picture() -> str:
    """The floors as the README shows them, top floor first."""
    lines = []
    for floor in FLOORS:
        name = floor.name.upper()
        for part, holds in floor.parts:
            text = wrap(holds, _WIDTH - _NAME_WIDTH - _PART_WIDTH) or [""]
            lines.append(f"{name:<{_NAME_WIDTH}}{part:<{_PART_WIDTH}}{text[0]}".rstrip())
            lines += [" " * (_NAME_WIDTH + _PART_WIDTH) + more for more in text[1:]]
            name = ""
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(picture(), end="")
