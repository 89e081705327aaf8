"""A dry run of a migration with a ``schema_registry`` section: plans subjects, writes to no registry or cluster.

Every catch-up task runs with ``dry_run`` as the DAG renders it for ``mode: dry-run`` on a migration that never
ran; both clusters (``test_shared_destination.snapshot``) and both registries (subjects, versions, ids, modes,
compatibility, the global levels) are snapshotted before and compared after.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from scenarios import write_spec
from schema_support import registry, seed_tenant
from test_shared_destination import snapshot

import schema_registries as srtb
from kafka_ferry.operators.copy import PlanCopyBatchOperator
from kafka_ferry.operators.provision import (
    MigrationPreflightOperator,
    ProvisionMirrorGroupsOperator,
    ProvisionMirrorTopicsOperator,
)
from kafka_ferry.operators.schemas import DecodeCheckOperator, MigrateSchemasOperator
from kafka_ferry.operators.translation import TranslateOffsetsOperator

pytestmark = pytest.mark.integration


def registry_state(url: str, name: str, prefix: str) -> dict:
    sr = registry(url, name)
    try:
        return {"subjects": {s: sr.read_subject(s) for s in sr.subjects() if prefix in s},
                "compatibility": sr.global_compatibility(),
                "mode": sr._http("GET", "mode", "read the global mode", missing={})}
    finally:
        sr.close()


def test_a_dry_run_with_schemas_writes_to_no_registry_and_no_cluster(registries, clusters, tmp_path, monkeypatch):
    tenant = seed_tenant(srtb.SOURCE.url, clusters, clusters.unique("drysr"))
    p = tenant.prefix
    for conn_id, url in (("kf_sr_dry_src", srtb.SOURCE.url), ("kf_sr_dry_dst", srtb.REMAP.url)):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "schemaregistry",
                                                                          "host": url}))
    monkeypatch.setenv("KFERRY_WORK_DIR", str(tmp_path / "work"))
    spec_path = Path(write_spec(tmp_path, clusters, p, source={"connection_id": clusters.SOURCE_CONN,
                                                               "alias": f"s-{p}"}))
    spec_path.write_text(spec_path.read_text() + yaml.safe_dump({"schema_registry": {
        "source_connection_id": "kf_sr_dry_src", "destination_connection_id": "kf_sr_dry_dst", "mode": "remap",
        "subjects_include": [re.escape(tenant.audit_subject)], "decode_check": "enforce"}}))
    path = str(spec_path)

    def everything():
        return {"clusters": snapshot(clusters, p),
                "source registry": registry_state(srtb.SOURCE.url, "source", p),
                "destination registry": registry_state(srtb.REMAP.url, "destination", p)}

    before = everything()
    context = {"params": {"mode": "dry-run"}, "run_id": "dry"}
    MigrationPreflightOperator(task_id="preflight", spec_path=path).execute(context)
    schemas = MigrateSchemasOperator(task_id="migrate_schemas", spec_path=path, dry_run="True").execute(context)
    ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=path, dry_run="True").execute(context)
    ProvisionMirrorGroupsOperator(task_id="provision_groups", spec_path=path, dry_run="True").execute(context)
    batch = PlanCopyBatchOperator(task_id="plan_copy", spec_path=path, dry_run="True").execute(context)
    decode = DecodeCheckOperator(task_id="decode_check", spec_path=path, dry_run="True").execute(context)
    TranslateOffsetsOperator(task_id="translate_offsets", spec_path=path, dry_run="True").execute(context)

    assert everything() == before
    assert before["destination registry"]["subjects"] == {}
    assert schemas["dry_run"] and any(f"{tenant.topics['orders']}-value" in line for line in schemas["diff"])
    assert batch["dry_run"] and batch["offsets"] == sum(tenant.records.values())
    assert decode == {"skipped": "dry run"}
