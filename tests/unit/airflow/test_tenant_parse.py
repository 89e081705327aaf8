"""The DAG processor refuses, per DAG file, what binds a spec to its tenant (issue 36, case 1): a name another spec
file of the folder holds (both files, each naming the other), and with the platform's tenants file a spec outside
its tenant's spec paths or name prefixes, or claiming another tenant."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kafka_ferry.dag_factory import write_stubs

REPO = Path(__file__).resolve().parents[3]
DEMO = (REPO / "dags" / "migrations" / "demo-tenant.yaml").read_text()


def load(folder):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(folder))


@pytest.fixture()
def dags(tmp_path, monkeypatch):
    monkeypatch.delenv("KFERRY_TENANTS_FILE", raising=False)
    folder = tmp_path / "dags"
    (folder / "migrations").mkdir(parents=True)
    return folder


def spec(folder: Path, file_name: str, name: str, tenant: str = "demo") -> Path:
    path = folder / "migrations" / file_name
    path.write_text(DEMO.replace("name: demo-tenant", f"name: {name}").replace("tenant: demo", f"tenant: {tenant}"))
    return path


def test_two_files_with_one_name_both_fail_naming_each_other(dags):
    first, second = spec(dags, "orders.yaml", "orders"), spec(dags, "orders-copy.yaml", "orders")
    spec(dags, "other.yaml", "other")
    write_stubs(dags)
    bag = load(dags)
    assert sorted(bag.dag_ids) == ["kafka_ferry__other"]
    errors = {Path(k).name: v for k, v in bag.import_errors.items()}
    assert f"{second} has this name too" in errors["migration_orders.py"]
    assert f"{first} has this name too" in errors["migration_orders_copy.py"]


def test_with_the_tenants_file_a_spec_is_bound_by_its_place_and_name(dags, tmp_path, monkeypatch):
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"spec_root": str(dags), "tenants": {
        "demo": {"spec_paths": ["migrations/demo-*.yaml"], "name_prefixes": ["demo-"],
                 "connections": ["kafka_source", "kafka_destination", "spark_local", "schema_registry_source",
                                 "schema_registry_destination"],
                 "state_topics": ["kafka-ferry.demo-*"], "destination_topic_prefixes": [""]},
        "globex": {"spec_paths": ["migrations/globex-*.yaml"], "name_prefixes": ["globex-"]}}}))
    monkeypatch.setenv("KFERRY_TENANTS_FILE", str(tenants))
    spec(dags, "demo-orders.yaml", "demo-orders")
    claiming = spec(dags, "globex-orders.yaml", "demo-payments")  # globex's file saying tenant demo, demo's name
    outside = spec(dags, "stray.yaml", "demo-stray")
    write_stubs(dags)
    bag = load(dags)
    assert sorted(bag.dag_ids) == ["kafka_ferry__demo-orders"], bag.import_errors
    errors = {Path(k).name: v for k, v in bag.import_errors.items()}
    assert f"the spec file {claiming} belongs to tenant 'globex'" in errors["migration_globex_orders.py"]
    assert f"the spec file {outside} is in no tenant's spec_paths" in errors["migration_stray.py"]
