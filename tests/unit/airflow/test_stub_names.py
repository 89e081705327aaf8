"""One spec file, one DAG file: names that map to one DAG file are refused naming both (issue 36, case 8).

Reproduction: ``a-b.yaml``, ``a_b.yaml`` and ``a.b.yaml`` all became ``migration_a_b.py``; the first written
stub won and the other specs silently had no DAG. ``kafka-ferry check`` (documented as changing nothing) wrote
a DAG stub for every YAML in the folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_ferry.core.specs.spec_check import check_files
from kafka_ferry.dag_factory import write_stubs

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "dags" / "migrations" / "demo-tenant.yaml"
COLLIDING = ("a-b.yaml", "a_b.yaml", "a.b.yaml")


@pytest.fixture()
def dags(tmp_path):
    folder = tmp_path / "dags"
    (folder / "migrations").mkdir(parents=True)
    good = DEMO.read_text()
    shutil.copy(DEMO, folder / "migrations" / "demo-tenant.yaml")
    for index, name in enumerate(COLLIDING):
        (folder / "migrations" / name).write_text(good.replace("name: demo-tenant", f"name: ab-{index}"))
    return folder


def test_one_function_names_every_dag_file():
    from kafka_ferry.core.specs.spec_check import dag_file_name

    assert dag_file_name("demo-tenant.yaml") == "migration_demo_tenant.py"
    assert dag_file_name("migrations/x.y-z.yaml") == "migration_x_y_z.py"
    assert {dag_file_name(n) for n in COLLIDING} == {"migration_a_b.py"}


def test_colliding_spec_files_get_no_dag_file_and_each_is_named(dags):
    refused: list[str] = []
    created = write_stubs(dags, refused)
    assert [p.name for p in created] == ["migration_demo_tenant.py"]
    assert not (dags / "migration_a_b.py").exists()
    assert len(refused) == 1
    for name in COLLIDING:
        assert f"migrations/{name}" in refused[0]
    assert "migration_a_b.py" in refused[0]


def test_make_dags_exits_1_on_a_collision(dags):
    done = subprocess.run([sys.executable, "-m", "kafka_ferry.dag_factory", str(dags)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1
    assert "refused: migrations/a-b.yaml and migrations/a.b.yaml and migrations/a_b.yaml would both be DAG file " \
           "migration_a_b.py" in done.stderr


def test_one_stub_only_and_its_collision(dags):
    refused: list[str] = []
    assert [p.name for p in write_stubs(dags, refused, only="demo-tenant.yaml")] == ["migration_demo_tenant.py"]
    assert refused == []
    assert write_stubs(dags, refused, only="a_b.yaml") == []
    assert len(refused) == 1 and "migrations/a-b.yaml" in refused[0]


def test_spec_check_names_both_files(dags):
    paths = [dags / "migrations" / "a-b.yaml", dags / "migrations" / "a.b.yaml", dags / "migrations" /
             "demo-tenant.yaml"]
    valid, errors = check_files(paths)
    assert valid == [f"ok: {paths[2]} (DAG kafka_ferry__demo-tenant)"]
    assert [e.path for e in errors] == [str(paths[0]), str(paths[1])]
    for error in errors:
        assert f"{paths[0]} and {paths[1]} would both be DAG file migration_a_b.py" in str(error)


def test_preparing_the_environment_writes_no_dag_file(dags, monkeypatch):
    """Every command prepares its environment first; `check`, `status`, `acls` write nothing after it
    (tests/integration/test_cli.py runs them on the test bed)."""
    from kafka_ferry.cli import prepare_environment

    for name in ("AIRFLOW__CORE__DAGS_FOLDER", "AIRFLOW__CORE__LOAD_EXAMPLES", "AIRFLOW__LOGGING__LOGGING_LEVEL"):
        monkeypatch.setenv(name, "")  # restored after the test: the function sets them for its process
    before = sorted(p.name for p in dags.iterdir())
    assert prepare_environment(dags / "migrations" / "demo-tenant.yaml") == dags
    assert sorted(p.name for p in dags.iterdir()) == before
