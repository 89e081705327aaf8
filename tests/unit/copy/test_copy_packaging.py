"""The zip shipped to executors holds the package's sources, and the same sources give the same zip."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import kafka_ferry
from kafka_ferry.copy.packaging import build_package_zip


def test_zip_holds_every_module_and_is_reproducible(tmp_path):
    first = build_package_zip(tmp_path / "a")
    second = build_package_zip(tmp_path / "b")
    assert first.name == second.name and first.read_bytes() == second.read_bytes()
    names = zipfile.ZipFile(first).namelist()
    assert "kafka_ferry/__init__.py" in names and "kafka_ferry/copy/partition_copier.py" in names
    assert not [n for n in names if "__pycache__" in n or not n.endswith(".py")]


def test_a_fresh_interpreter_imports_the_copy_code_from_the_zip(tmp_path):
    package = build_package_zip(tmp_path)
    code = (f"import sys; sys.path.insert(0, {str(package)!r})\n"
            "import kafka_ferry.copy.runner, kafka_ferry; print(kafka_ferry.__file__)")
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": _site_packages()})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{package}/kafka_ferry/__init__.py"


def _site_packages() -> str:
    """confluent_kafka's location without the editable install's .pth (skipped by -S)."""
    import confluent_kafka

    return str(__import__("pathlib").Path(confluent_kafka.__file__).parents[1])


def test_package_is_this_checkout():
    assert kafka_ferry.__file__.endswith("kafka_ferry/__init__.py")
