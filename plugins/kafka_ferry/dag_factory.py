"""Builds one migration DAG from one YAML spec.

Each tenant has a two-line DAG file (`dags/migration_<name>.py`, named by `core.specs.spec_check.dag_file_name`)
calling `dag_from_yaml`: Airflow records import errors per file, so a broken spec fails only its own DAG,
never another tenant's. `make dags` writes the missing stubs.
"""

from __future__ import annotations

import ast
import logging
import sys
from datetime import timedelta
from pathlib import Path

from airflow.sdk import DAG, BaseOperator, conf

from kafka_ferry.copy.plan import work_dir
from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.cutover.routes import ACL_TASK
from kafka_ferry.core.specs.patterns import SPEC_FILE_NAME
from kafka_ferry.core.specs.spec import MigrationSpec, load_spec
from kafka_ferry.core.specs.spec_check import (
    SPEC_FILE_NAME_RULE,
    check_at_parse,
    dag_file_name,
    stub_collision_message,
    stub_name_collisions,
)
from kafka_ferry.core.specs.tenants import AIRFLOW_CONFIG, load_tenants, tenants_file_path
from kafka_ferry.core.specs.trigger_form import DRY_RUN_TEMPLATE
from kafka_ferry.dag_promotion import (
    PREFLIGHT_TASK,
    add_mode_branch,
    add_promotion_tasks,
    add_route_branch,
    add_staged_promotion_tasks,
    add_translation_tasks,
    trigger_params,
)
from kafka_ferry.operators.acls import MigrateAclsOperator
from kafka_ferry.operators.copy import copy_batch_tasks
from kafka_ferry.operators.provision import (
    MigrationPreflightOperator,
    ProvisionMirrorGroupsOperator,
    ProvisionMirrorTopicsOperator,
)
from kafka_ferry.operators.schemas import DecodeCheckOperator, MigrateSchemasOperator
from kafka_ferry.promotion.group_readiness import read_ready_file

# Airflow's safe mode only parses files that mention both "airflow" and "dag": the docstring does.
# The spec's file name is data: it reaches the stub only as a Python literal (repr of a name that passed
# SPEC_FILE_NAME), never formatted into code or into the docstring.
STUB_TEMPLATE = '''"""Airflow DAG of one kafka-ferry migration spec (written by `make dags`)."""
from kafka_ferry.dag_factory import dag_from_yaml

SPEC = {spec_literal}
dag = dag_from_yaml(__file__, SPEC)
'''


class UnsafeSpecFileName(Retryable, ValueError):
    """A spec file whose name could not be a DAG file's name; no stub is written for it."""


def stub_text(yaml_name: str) -> str:
    """The DAG file of ``migrations/<yaml_name>``; refuses a name outside SPEC_FILE_NAME."""
    if not SPEC_FILE_NAME.fullmatch(yaml_name):
        raise UnsafeSpecFileName(f"migrations/{yaml_name!r}: {SPEC_FILE_NAME_RULE}; no DAG file written")
    literal = repr(f"migrations/{yaml_name}")
    if ast.literal_eval(literal) != f"migrations/{yaml_name}":  # the literal is the name and nothing more
        raise UnsafeSpecFileName(f"migrations/{yaml_name!r}: cannot be written as a literal")
    return STUB_TEMPLATE.format(spec_literal=literal)


def build_migration_dag(spec: MigrationSpec, spec_path: Path) -> DAG:
    """The migration's DAG: pre-flight -> route branch -> rollback (rollback, rollback-plan), or
    [migrate schemas] -> provision topics -> provision groups -> [migrate ACLs] -> mode branch (every other mode).

    The pre-flight checks the trigger (mode, confirmation, fields) for every mode before anything changes; the rollback
    modes never run provisioning or the schema migration, which refuse the promoted migration a rollback starts from.
    With ``acls.migrate`` the ACL migration is part of that provisioning chain: it reads the groups provision_groups
    recorded, runs (idempotent) before every catch-up and promotion moves anything, and the route branch skips it on
    the rollback modes as it skips the rest of the chain; ``dry_run`` (mode dry-run) gives its diff only.

    catch-up (every scheduled run, and the trigger form's default): plan -> Spark copy batch from the stored
    offsets -> report -> [decode check] -> translate offsets + write checkpoints. promote (trigger form only):
    source quiesced and groups inactive -> final copy -> lag 0 -> translate + commit groups -> synced ->
    reconcile + mark.
    """
    with DAG(
        dag_id=spec.dag_id,
        description=spec.description or f"Kafka migration {spec.name} for tenant {spec.tenant}",
        schedule=spec.schedule,
        catchup=False,
        max_active_runs=1,  # two copy batches of one migration must never overlap
        tags=["kafka-ferry", f"tenant:{spec.tenant}"],
        # every task is bounded (the copy tasks by copy_seconds, the sensors by their own timeout too)
        default_args={"retries": 2, "retry_delay": timedelta(seconds=30),
                      "execution_timeout": timedelta(seconds=spec.timeouts.task_seconds)},
        params=trigger_params(spec.name, *_last_readiness(spec.name)),
        doc_md=f"Migration **{spec.name}** (tenant `{spec.tenant}`) from `{spec.source.alias}` to "
               f"`{spec.destination.alias}`. Spec: `{spec_path.name}`.",
    ) as dag:
        preflight = MigrationPreflightOperator(task_id=PREFLIGHT_TASK, spec_path=str(spec_path))
        topics = ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=str(spec_path),
                                               dry_run=DRY_RUN_TEMPLATE)
        groups = ProvisionMirrorGroupsOperator(task_id="provision_groups", spec_path=str(spec_path),
                                               dry_run=DRY_RUN_TEMPLATE)
        if spec.schema_registry:  # subjects exist on the destination before any mirror topic or record does
            schemas = MigrateSchemasOperator(task_id="migrate_schemas", spec_path=str(spec_path),
                                             dry_run=DRY_RUN_TEMPLATE)
            route = add_route_branch(preflight, provision_entry=schemas.task_id)
            route >> schemas >> topics
        else:
            route = add_route_branch(preflight, provision_entry=topics.task_id)
            route >> topics
        topics >> groups
        provisioned: BaseOperator = groups
        if spec.acls.migrate:  # the ACLs are in place before any mode moves consumers or producers
            provisioned = MigrateAclsOperator(task_id=ACL_TASK, spec_path=str(spec_path),
                                              dry_run=DRY_RUN_TEMPLATE)
            groups >> provisioned
        branch = add_mode_branch(provisioned, catch_up_entry="plan_copy")
        report: BaseOperator  # the copy's report task, or the decode check after it
        plan_copy, _, report = copy_batch_tasks(spec, str(spec_path))
        branch >> plan_copy
        if spec.schema_registry and spec.schema_registry.decode_check != "off":
            # the copied records decode on the destination; the counts reach the page translate_offsets writes
            report >> (report := DecodeCheckOperator(task_id="decode_check", spec_path=str(spec_path),
                                                     dry_run=DRY_RUN_TEMPLATE))
        add_translation_tasks(dag, spec_path, report)
        add_promotion_tasks(dag, spec, spec_path, branch)
        add_staged_promotion_tasks(dag, spec_path, branch, route, migration=spec.name)
    return dag


def dag_from_yaml(dag_file: str, relative_yaml: str) -> DAG:
    """Load the spec next to a DAG file and build its DAG; a bad spec raises SpecError (an import error).

    Refused here too, naming each: a spec whose ``name`` another spec file of the folder holds, and, with the
    platform's tenants file, one outside its tenant's spec paths, name prefixes or grants (``check_at_parse``).
    """
    spec_path = (Path(dag_file).resolve().parent / relative_yaml).resolve()
    spec = load_spec(spec_path)
    tenants_path = tenants_file_path(configured=conf.get(*AIRFLOW_CONFIG, fallback=None))
    tenants = load_tenants(tenants_path) if tenants_path is not None else None
    check_at_parse(spec, spec_path, tenants, tenants_path)
    return build_migration_dag(spec, spec_path)


def write_stubs(dags_folder: Path, refused: list[str] | None = None, only: str | None = None) -> list[Path]:
    """Create the DAG file (``core.specs.spec_check.dag_file_name``) of every `migrations/*.yaml` that lacks one (or of
    the one named ``only``); returns the new files.

    A YAML whose name is not a safe file name gets no DAG file, nor do two YAMLs whose names map to one DAG file
    (``a-b.yaml`` and ``a.b.yaml``: neither, so none silently loses its DAG to the other): the reasons, naming the
    files, go to ``refused``.
    """
    yaml_files = sorted((dags_folder / "migrations").glob("*.yaml"))
    collisions = stub_name_collisions([f"migrations/{f.name}" for f in yaml_files])
    colliding = {name for files in collisions.values() for name in files}
    reasons = [stub_collision_message(stub, files) for stub, files in sorted(collisions.items())
               if only is None or f"migrations/{only}" in files]
    created = []
    for yaml_file in yaml_files:
        if only is not None and yaml_file.name != only:
            continue
        try:
            text = stub_text(yaml_file.name)
        except UnsafeSpecFileName as exc:
            reasons.append(str(exc))
            continue
        if f"migrations/{yaml_file.name}" in colliding:
            continue
        stub = dags_folder / dag_file_name(yaml_file.name)
        if not stub.exists():
            stub.write_text(text)
            created.append(stub)
    if refused is not None:
        refused.extend(reasons)
    return created


def _last_readiness(migration: str) -> tuple[list[str], int | None]:
    """The trigger form's defaults from the last catch-up's readiness file; none when it cannot be read.

    Read while the DAG is parsed: a work dir in object storage that cannot be reached (or its connection missing)
    must cost the form its defaults, never the DAG its import; the tasks that write there fail with the cause.
    """
    try:
        return read_ready_file(work_dir(migration))
    except Exception as exc:  # noqa: BLE001 - see the docstring: parse time, defaults only
        logging.getLogger(__name__).warning("kafka-ferry %s: the work dir's readiness file was not read: %s",
                                            migration, type(exc).__name__)
        return [], None


def main(argv: list[str]) -> int:
    refused: list[str] = []
    for path in write_stubs(Path(argv[0] if argv else "dags"), refused):
        print(f"wrote {path}")
    for reason in refused:
        print(f"refused: {reason}", file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

