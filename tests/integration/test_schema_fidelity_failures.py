"""A spec that leaves soft-deleted versions behind, against real registries: the records that carry their ids are
found, named (topic, partition, offset, subject, version) and stop the migration once, never reach promotion.

Remap (Apicurio): the copy task fails in one try, its message the cause, on spark-submit and Spark Connect, and
in a real DAG run (dag.test) that is the message the task instance records. Preserve (AxonOps): the copy moves the
records as they are; the decode check finds they decode on the source but not on the destination, fails the run
whatever `decode_check` says, and promotion is refused until a run finds them decoding.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from airflow.sdk.exceptions import AirflowFailException
from scenarios import provision, run_batch, write_spec
from schema_support import registry, seed_tenant
from test_fail_fast_dag_run import airflow_home, run_migration_dag  # noqa: F401 - a fixture, used by name

import schema_registries as srtb
from kafka_ferry.core.common.state_records import DECODE_CHECK_KIND, PROMOTION_KIND
from kafka_ferry.core.schemas.decode_faults import MIGRATION_FAULT_FIELD, MigrationFaultsFound, blocking
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.operators.schemas import DecodeCheckOperator, MigrateSchemasOperator
from kafka_ferry.promotion.steps import PromotionRunner
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(scope="module")
def tenant(registries, clusters):
    return seed_tenant(srtb.SOURCE.url, clusters, clusters.unique("srf"))


def schema_spec(tmp_path, clusters, tenant, name: str, destination_url: str, mode: str, monkeypatch,
                **more) -> str:
    """The tenant's migration with schemas, opting out of soft-deleted versions; connections in the env."""
    src, dst = f"kf_sr_{name}_src", f"kf_sr_{name}_dst"
    for conn_id, url in ((src, srtb.SOURCE.url), (dst, destination_url)):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "schemaregistry",
                                                                          "host": url}))
    path = Path(write_spec(tmp_path, clusters, tenant.prefix))
    doc = yaml.safe_load(path.read_text())
    doc["name"] = name  # its own state topic and offset-syncs topic: the tests share the tenant's topics
    doc["destination"]["alias"] = f"dst-{name}"
    doc["schema_registry"] = {"source_connection_id": src, "destination_connection_id": dst, "mode": mode,
                              "subjects_include": [re.escape(tenant.audit_subject)],
                              "include_soft_deleted": False, **more}
    if mode == "remap":  # its own subject names on the shared remap registry
        doc["topics"]["rename"] = {"policy": "prefix", "prefix": f"{name}."}
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def retired_record_pattern(tenant) -> str:
    """Any of the records written with the soft-deleted version: '<topic>-<partition> at offset <offset>'."""
    orders = tenant.topics["orders"]
    return "|".join(re.escape(f"{orders}-{p} at offset {o}") for p, o in tenant.retired[orders])


def assert_names_the_retired_record(tenant, message: str) -> None:
    orders = tenant.topics["orders"]
    assert re.search(retired_record_pattern(tenant), message), message
    assert f"schema id {tenant.retired_id}" in message, message
    assert f"subject '{orders}-value' version 3, soft-deleted" in message, message
    assert "include_soft_deleted" in message and "pass-through" not in message, message
    assert "Cannot execute" not in message, message


@pytest.mark.parametrize("engine", ["spark-submit", "spark-connect"])
def test_an_unmapped_id_fails_the_copy_task_once_naming_record_subject_and_version(
        tenant, clusters, tmp_path, work_dir, monkeypatch, engine, request):
    spark_conn = clusters.SPARK_CONN if engine == "spark-submit" else request.getfixturevalue("spark_connect")
    name = f"un{engine[6]}{clusters.unique('')[-6:]}".replace("-", "")
    spec_path = schema_spec(tmp_path, clusters, tenant, name, srtb.REMAP.url, "remap", monkeypatch)
    MigrateSchemasOperator(task_id="migrate_schemas", spec_path=spec_path).execute({"run_id": "r1"})
    provision(spec_path)

    with pytest.raises(AirflowFailException) as failure:  # AirflowFailException: the task is not retried
        run_batch(spec_path, spark_conn)

    assert_names_the_retired_record(tenant, str(failure.value))
    print(f"\nunmapped schema id on {engine}: the copy task failed once with: {failure.value}")
    page = next((work_dir / name / "runs").glob("*.html")).read_text()
    assert "The run failed" in page and f"schema id {tenant.retired_id}" in page


@pytest.mark.airflow
def test_in_a_dag_run_the_copy_task_records_the_cause_in_one_try(tenant, clusters, tmp_path, airflow_home,  # noqa: F811
                                                                  monkeypatch):
    name = f"undag{clusters.unique('')[-6:]}".replace("-", "")
    spec_path = schema_spec(tmp_path, clusters, tenant, name, srtb.REMAP.url, "remap", monkeypatch)
    spec = yaml.safe_load(Path(spec_path).read_text())
    connections = {k: v for k, v in os.environ.items() if k.startswith("AIRFLOW_CONN_")}

    result, log = run_migration_dag(airflow_home, tmp_path, spec, connections)

    copy = result["tasks"]["copy_batch"]
    assert (result["state"], copy["state"], copy["try_number"]) == ("failed", "failed", 1), log[-6000:]
    assert result["tasks"]["migrate_schemas"]["state"] == "success", log[-6000:]
    recorded = next((line for line in log.splitlines() if "AirflowFailException: copy stopped on" in line), None)
    assert recorded is not None, "\n".join(line for line in log.splitlines() if "xception" in line)[-4000:]
    assert_names_the_retired_record(tenant, recorded)
    print(f"\ncopy_batch of a DAG run: failed in try 1 of 3 ({copy['seconds']:.1f} s), recorded: {recorded[-500:]}")


class _TI:
    """The plan task's XCom as the decode check pulls it: where the batch report is."""

    def __init__(self, plan: dict | None = None):
        self.plan = plan or {}

    def xcom_pull(self, task_ids):
        return self.plan


def test_preserve_without_soft_deleted_versions_fails_the_decode_check_and_blocks_promotion(
        tenant, clusters, tmp_path, work_dir, monkeypatch):
    spec_path = schema_spec(tmp_path, clusters, tenant, f"pvf{clusters.unique('')[-6:]}".replace("-", ""),
                            srtb.PRESERVE.url, "preserve", monkeypatch,
                            decode_check="report")
    MigrateSchemasOperator(task_id="migrate_schemas", spec_path=spec_path).execute({"run_id": "r1"})
    provision(spec_path)
    batch = run_batch(str(spec_path), clusters.SPARK_CONN)  # preserve: records move as they are, ids and all
    (report_path,) = (work_dir / load_spec(spec_path).name).rglob(f"report-{batch['batch_id']}.json")

    check = DecodeCheckOperator(task_id="decode_check", spec_path=spec_path)
    with pytest.raises(AirflowFailException) as failure:  # whatever decode_check says ("report" here)
        check.execute({"ti": _TI({"report_path": str(report_path), "batch_id": batch["batch_id"]}),
                       "run_id": "b1"})
    message, orders = str(failure.value), tenant.topics["orders"]
    assert "5 copied record(s) decode against the source registry but not against the destination's" in message
    assert f"schema id {tenant.retired_id}" in message and f"subject '{orders}-value' version 3" in message
    retired = sorted(tenant.retired[orders])
    for partition in (0, 1):
        offsets = [o for p, o in retired if p == partition]
        assert f"{orders}-{partition} offsets {offsets}" in message, message
    page = (work_dir / load_spec(spec_path).name / "runs" / "b1.html").read_text()
    assert "The run failed" in page and "decode against the source registry but not" in page

    spec = load_spec(spec_path)
    store = MigrationStateStore(clusters.cluster("destination"), spec.state_topic_name)
    with pytest.raises(MigrationFaultsFound, match=r"promotion of .* refused: copied records decode on the source"):
        PromotionRunner(spec, clusters.cluster("source"), clusters.cluster("destination"), store,
                        work_dir=tmp_path / "promotion").run()
    assert store.read_kind(PROMOTION_KIND) == {}  # no step ran

    # The fix: the soft-deleted versions move (the default); the next check reads the same records and passes.
    doc = yaml.safe_load(Path(spec_path).read_text())
    doc["schema_registry"]["include_soft_deleted"] = True
    Path(spec_path).write_text(yaml.safe_dump(doc))
    MigrateSchemasOperator(task_id="migrate_schemas", spec_path=spec_path).execute({"run_id": "r2"})
    subject = registry(srtb.PRESERVE.url, "axonops").read_subject(f"{orders}-value")
    assert subject is not None and subject.versions[2].deleted
    result = DecodeCheckOperator(task_id="decode_check", spec_path=spec_path).execute({"ti": _TI(), "run_id": "b2"})
    assert result["failed"] == 0 and result["migration_faults"] == []
    assert result["topics"][orders]["records"] == 25
    marks = store.read_kind(DECODE_CHECK_KIND)
    assert blocking(marks) == [] and not any(m.get(MIGRATION_FAULT_FIELD) for m in marks.values())
