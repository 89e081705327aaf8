"""`make dags` turns spec file names into DAG files: a hostile name yields no executable content.

Reproductions of issue 24: a spec named ``acme");__import__("os").system("id");("x.yaml`` made a DAG file
running that call in the dag-processor and on every worker; ``{{ 7*7 }}`` in a file name was rendered
(``spec_path`` was a template field).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from kafka_ferry.dag_factory import write_stubs

REPO = Path(__file__).resolve().parents[3]
HOSTILE = ['acme");__import__("os").system("id");("x.yaml', "t{{ 7*7 }}.yaml", 'q""".yaml',
           "nl\n.yaml", "x';import os;'.yaml"]


def stub_calls(text: str) -> list[str]:
    """Every call in a generated DAG file, as source text: only ``dag_from_yaml(__file__, SPEC)`` may be there."""
    tree = ast.parse(text)
    return [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Call)]


@pytest.fixture()
def hostile_dags(tmp_path):
    folder = tmp_path / "dags"
    (folder / "migrations").mkdir(parents=True)
    good = (REPO / "dags" / "migrations" / "demo-tenant.yaml").read_text()
    shutil.copy(REPO / "dags" / "migrations" / "demo-tenant.yaml", folder / "migrations" / "demo-tenant.yaml")
    for index, name in enumerate(HOSTILE):
        (folder / "migrations" / name).write_text(good.replace("name: demo-tenant", f"name: hostile-{index}"))
    return folder


def test_hostile_file_names_yield_no_dag_file_and_are_named(hostile_dags):
    refused: list[str] = []
    created = write_stubs(hostile_dags, refused)
    assert [p.name for p in created] == ["migration_demo_tenant.py"]
    assert len(refused) == len(HOSTILE)
    for name in HOSTILE:
        assert any(repr(name) in reason for reason in refused), name
    for stub in hostile_dags.glob("*.py"):
        assert stub_calls(stub.read_text()) == ["dag_from_yaml(__file__, SPEC)"], stub.name


def test_the_spec_path_is_a_literal_in_the_stub(hostile_dags):
    write_stubs(hostile_dags)
    tree = ast.parse((hostile_dags / "migration_demo_tenant.py").read_text())
    assigns: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                assert isinstance(target, ast.Name), ast.dump(target)
                assigns[target.id] = node.value
    assert isinstance(assigns["SPEC"], ast.Constant) and assigns["SPEC"].value == "migrations/demo-tenant.yaml"


def test_make_dags_entry_point_refuses_and_exits_1(hostile_dags):
    done = subprocess.run([sys.executable, "-m", "kafka_ferry.dag_factory", str(hostile_dags)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr.count("refused: ") == len(HOSTILE)
    for stub in hostile_dags.glob("*.py"):
        assert "__import__" not in stub.read_text() and "import os" not in stub.read_text()


def test_no_task_renders_the_spec_path_and_every_task_has_a_timeout(hostile_dags):
    from airflow.dag_processing.dagbag import DagBag

    (hostile_dags / "migrations" / "demo-tenant.yaml").write_text(
        (hostile_dags / "migrations" / "demo-tenant.yaml").read_text() + "timeouts:\n  copy_seconds: 900\n")
    write_stubs(hostile_dags)
    bag = DagBag(dag_folder=str(hostile_dags))
    assert bag.import_errors == {}
    dag = bag.dags["kafka_ferry__demo-tenant"]
    for task in dag.tasks:
        assert "spec_path" not in task.template_fields, task.task_id
        assert task.execution_timeout is not None, task.task_id
    assert dag.get_task("copy_batch").execution_timeout == timedelta(seconds=900)
    assert dag.get_task("promote_final_copy").execution_timeout == timedelta(seconds=900)
    assert dag.get_task("preflight").execution_timeout == timedelta(hours=1)


def test_a_hostile_spec_directory_is_reported_whole_and_yields_no_executable_dag_content(tmp_path):
    """The issue's acceptance: names, aliases and regexes together; the spec check names every problem (bounded
    by the subprocess timeout, not timed), and `make dags` writes nothing but the literal call."""
    folder = tmp_path / "dags"
    migrations = folder / "migrations"
    migrations.mkdir(parents=True)
    good = (REPO / "dags" / "migrations" / "demo-tenant.yaml").read_text()
    for index, name in enumerate(HOSTILE):
        (migrations / name).write_text(good.replace("name: demo-tenant", f"name: hostile-{index}"))
    levels = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"] + [
        f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    (migrations / "bomb.yaml").write_text(good.replace("name: demo-tenant", "name: bomb") + "\n".join(levels) + "\n")
    (migrations / "regex.yaml").write_text(good.replace("name: demo-tenant", 'name: "regex\\n"')
                                           .replace("include:", 'include: ["(a+)+b", "(x)\\\\1"]\n  old_include:', 1))
    specs = sorted(migrations.iterdir())
    done = subprocess.run([sys.executable, "-m", "kafka_ferry.core.specs.spec_check", "check", *map(str, specs)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert f"{len(specs)} spec(s) checked: 0 valid, {len(specs)} with" in done.stdout
    for name in HOSTILE:
        assert f"file name {name!r} refused" in done.stdout
    assert "YAML alias '*l0' refused" in done.stdout and "field 'name' = 'regex\\n'" in done.stdout
    assert "field 'topics.include[1]' = '(x)\\\\1': not a regex RE2 accepts" in done.stdout

    made = subprocess.run([sys.executable, "-m", "kafka_ferry.dag_factory", str(folder)], capture_output=True,
                          text=True, timeout=300)
    assert made.returncode == 1 and made.stderr.count("refused: ") == len(HOSTILE)
    stubs = sorted(folder.glob("*.py"))
    assert [s.name for s in stubs] == ["migration_bomb.py", "migration_regex.py"]  # safe names: an import error each
    for stub in stubs:
        assert stub_calls(stub.read_text()) == ["dag_from_yaml(__file__, SPEC)"], stub.name
