"""Every migration YAML yields one DAG; a broken YAML is an import error of its own DAG file only."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafka_ferry.dag_factory import write_stubs

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture()
def dags_folder(tmp_path):
    folder = tmp_path / "dags"
    (folder / "migrations").mkdir(parents=True)
    shutil.copy(REPO / "dags" / "migrations" / "demo-tenant.yaml", folder / "migrations" / "demo-tenant.yaml")
    good = (REPO / "dags" / "migrations" / "demo-tenant.yaml").read_text()
    # "other" is the demo tenant without its schema registry (the demo's block is the file's last)
    without_schemas = good[:good.index("schema_registry:")]
    (folder / "migrations" / "other.yaml").write_text(without_schemas.replace("name: demo-tenant", "name: other"))
    (folder / "migrations" / "broken.yaml").write_text(
        good.replace("name: demo-tenant", "name: broken").replace("max_records_per_partition: 50000",
                                                                    "max_records_per_partition: -1"))
    write_stubs(folder)
    return folder


def load(folder):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(folder))


def test_repo_dags_import_without_errors():
    bag = load(REPO / "dags")
    assert bag.import_errors == {}
    yamls = sorted(p.stem for p in (REPO / "dags" / "migrations").glob("*.yaml"))
    examples = {"kafka_ferry_example_post_cutover_check"}  # dags/examples/: parsed with the rest, one DAG each
    assert sorted(d.removeprefix("kafka_ferry__") for d in bag.dag_ids if d not in examples) == yamls
    assert examples <= set(bag.dag_ids)


def test_every_yaml_has_its_dag_file():
    stubs = {p.name for p in (REPO / "dags").glob("migration_*.py")}
    expected = {f"migration_{p.stem.replace('-', '_')}.py" for p in (REPO / "dags" / "migrations").glob("*.yaml")}
    assert stubs == expected, "run `make dags`"


def test_broken_yaml_breaks_only_its_own_dag(dags_folder):
    bag = load(dags_folder)
    assert sorted(bag.dag_ids) == ["kafka_ferry__demo-tenant", "kafka_ferry__other"]
    assert list(bag.import_errors) == [str(dags_folder / "migration_broken.py")]
    message = next(iter(bag.import_errors.values()))
    assert (f"{dags_folder / 'migrations' / 'broken.yaml'}:20: field 'copy.max_records_per_partition' = -1: "
            "Input should be greater than 0") in message


def test_dag_shape_and_params(dags_folder):
    dag = load(dags_folder).dags["kafka_ferry__demo-tenant"]  # .dags: no metadata DB needed
    assert dag.max_active_runs == 1
    assert "tenant:demo" in dag.tags
    assert dag.get_task("preflight").downstream_task_ids == {"choose_route"}
    assert dag.get_task("choose_route").downstream_task_ids == {"migrate_schemas", "rollback"}  # demo: Avro
    assert dag.get_task("migrate_schemas").downstream_task_ids == {"provision_topics"}
    assert dag.get_task("provision_topics").downstream_task_ids >= {"provision_groups"}
    params = dag.params
    assert (params["mode"], params["confirm_migration"], params["allow_rewind"]) == ("catch-up", None, False)
    assert "dry_run" not in dag.params
    assert dag.get_task("plan_copy").dry_run_flag == dag.get_task("provision_topics").dry_run_flag == (
        "{{ params.mode in ('dry-run', 'rollback-plan') }}")


def test_no_task_shadows_airflows_dry_run_method(dags_folder):
    """``BaseOperator.dry_run()`` is Airflow's (it renders the template fields); the operators keep their own flag
    as ``dry_run_flag``: a ``dry_run`` attribute made the method a string and its call a TypeError."""
    from airflow.sdk import BaseOperator

    from kafka_ferry.operators.base import DryRunOperator

    dag = load(dags_folder).dags["kafka_ferry__demo-tenant"]
    planning = [t for t in dag.tasks if isinstance(t, DryRunOperator)]
    assert {t.task_id for t in planning} >= {"migrate_schemas", "provision_topics", "plan_copy", "rollback"}
    for task in dag.tasks:
        assert "dry_run" not in vars(task) and type(task).dry_run is BaseOperator.dry_run, task.task_id
        task.dry_run()


def test_write_stubs_is_idempotent(dags_folder):
    assert write_stubs(dags_folder) == []


def test_a_spec_with_a_schema_registry_migrates_schemas_between_preflight_and_topics(dags_folder):
    bag = load(dags_folder)
    with_schemas, without = bag.dags["kafka_ferry__demo-tenant"], bag.dags["kafka_ferry__other"]
    assert with_schemas.get_task("choose_route").downstream_task_ids == {"migrate_schemas", "rollback"}
    assert without.get_task("choose_route").downstream_task_ids == {"provision_topics", "rollback"}
    assert with_schemas.get_task("migrate_schemas").downstream_task_ids == {"provision_topics"}
    assert with_schemas.get_task("migrate_schemas").dry_run_flag == "{{ params.mode in ('dry-run', 'rollback-plan') }}"
    assert "migrate_schemas" not in without.task_ids
    # the batch's records are decoded on the destination before translation writes the run's page
    assert with_schemas.get_task("copy_report").downstream_task_ids == {"decode_check"}
    assert with_schemas.get_task("decode_check").downstream_task_ids == {"translate_offsets"}
    assert "decode_check" not in without.task_ids


def test_a_decode_check_set_off_leaves_the_task_out(dags_folder):
    spec = dags_folder / "migrations" / "other.yaml"
    spec.write_text(spec.read_text() + "schema_registry:\n  source_connection_id: sr_src\n"
                                       "  destination_connection_id: sr_dst\n  decode_check: \"off\"\n")
    dag = load(dags_folder).dags["kafka_ferry__other"]
    assert "migrate_schemas" in dag.task_ids and "decode_check" not in dag.task_ids
    assert dag.get_task("copy_report").downstream_task_ids == {"translate_offsets"}


def test_acls_migrate_puts_the_acl_migration_between_provisioning_and_the_mode_branch(dags_folder):
    """``acls.migrate``: ``migrate_acls`` after provision_groups (it reads the groups recorded there), before the mode
    branch (every mode's work follows it), after the route branch (a rollback never reaches it); dry run as the
    provisioning's. Off (the default): no such task."""
    spec = dags_folder / "migrations" / "other.yaml"
    spec.write_text(spec.read_text() + "acls:\n  migrate: true\n")
    bag = load(dags_folder)
    dag, without = bag.dags["kafka_ferry__other"], bag.dags["kafka_ferry__demo-tenant"]
    assert "migrate_acls" not in without.task_ids
    assert without.get_task("provision_groups").downstream_task_ids == {"choose_mode"}
    task = dag.get_task("migrate_acls")
    assert task.upstream_task_ids == {"provision_groups"}
    assert task.downstream_task_ids == {"choose_mode"}
    assert dag.get_task("choose_mode").upstream_task_ids == {"migrate_acls"}
    assert task.dry_run_flag == dag.get_task("provision_groups").dry_run_flag == (
        "{{ params.mode in ('dry-run', 'rollback-plan') }}")
    assert "migrate_acls" not in dag.get_task("rollback").get_flat_relative_ids(upstream=True)
    assert "rollback" not in task.get_flat_relative_ids(upstream=False)


@pytest.mark.parametrize("dag_id", ["kafka_ferry__demo-tenant", "kafka_ferry__other"])
def test_the_rollback_modes_branch_off_before_provisioning_and_every_other_mode_after_it(dags_folder, dag_id):
    """The route of each mode (issue 35): the rollback task follows the pre-flight's trigger check only, never
    provisioning or the schema migration (they refuse the promoted migration a rollback starts from); every other
    mode's task follows provisioning; the pre-flight precedes every task."""
    from kafka_ferry.dag_promotion import _route

    dag = load(dags_folder).dags[dag_id]
    provisioning = {"migrate_schemas", "provision_topics", "provision_groups"} & set(dag.task_ids)
    rollback = dag.get_task("rollback")
    assert rollback.upstream_task_ids == {"choose_route"}
    assert not provisioning & set(rollback.get_flat_relative_ids(upstream=True))
    entry = "migrate_schemas" if "migrate_schemas" in dag.task_ids else "provision_topics"
    after_provisioning = set(dag.get_task("provision_groups").get_flat_relative_ids(upstream=False))
    for task in ("plan_copy", "source_quiesced", "source_groups_inactive", "promote_groups", "promote_topics",
                 "promote_reconcile_mark", "translate_offsets"):
        assert task in after_provisioning, task
    assert set(dag.get_task("preflight").get_flat_relative_ids(upstream=False)) == set(dag.task_ids) - {"preflight"}
    for mode in ("catch-up", "dry-run", "promote", "promote-groups", "promote-topics"):
        assert _route(entry, params={"mode": mode}) == entry
    for mode in ("rollback", "rollback-plan"):
        assert _route(entry, params={"mode": mode}) == "rollback"
    with pytest.raises(ValueError, match="mode must be"):
        _route(entry, params={"mode": "yolo"})


def test_a_staged_mode_the_preflight_found_done_already_skips_the_rest_of_the_run():
    """``promote-groups`` / ``promote-topics`` whose every name is promoted already: the pre-flight says so in its
    XCom and the route follows nothing, so provisioning writes nothing (a no-op run); any other answer provisions."""
    from kafka_ferry.dag_promotion import _route
    from kafka_ferry.operators.provision import NO_OP_KEY

    class Ti:
        def __init__(self, xcom):
            self.xcom, self.asked = xcom, []

        def xcom_pull(self, task_ids):
            self.asked.append(task_ids)
            return self.xcom

    done = Ti({"mode": "promote-groups", NO_OP_KEY: True})
    assert _route("provision_topics", params={"mode": "promote-groups"}, ti=done) == []
    assert done.asked == ["preflight"]
    for xcom in ({"mode": "promote-topics", NO_OP_KEY: False}, {"mode": "catch-up"}, None):
        assert _route("provision_topics", params={"mode": "promote-topics"}, ti=Ti(xcom)) == "provision_topics"
    assert _route("provision_topics", params={"mode": "rollback"}, ti=done) == "rollback"
