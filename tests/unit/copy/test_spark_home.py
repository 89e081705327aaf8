"""The compiled mirror of a Spark install (copy/spark_home.py): the install's own files, except the Python zips,
which carry bytecode an interpreter uses; one mirror per install, zips and Python; never a failed batch."""

from __future__ import annotations

import logging
import subprocess
import sys
import zipfile
from pathlib import Path

from kafka_ferry.copy.spark_home import compiled_spark_home


def _install(root: Path, module_text: str = "ANSWER = 42\n") -> Path:
    (root / "jars").mkdir(parents=True)
    (root / "jars" / "spark-core.jar").write_bytes(b"jar")
    (root / "bin").mkdir()
    (root / "python" / "lib").mkdir(parents=True)
    (root / "python" / "README").write_text("python dir entry")
    with zipfile.ZipFile(root / "python" / "lib" / "pyspark.zip", "w") as zf:
        zf.writestr("pyspark/__init__.py", module_text)
        zf.writestr("pyspark/data/", b"")  # a directory entry is not copied as a file
        zf.writestr("pyspark/broken.py", "def (:\n")  # does not compile: kept as source, as the install has it
    with zipfile.ZipFile(root / "python" / "lib" / "py4j-src.zip", "w") as zf:
        zf.writestr("py4j/__init__.py", "")
    return root


def test_the_mirror_is_the_install_except_its_zips_which_carry_bytecode(tmp_path):
    install = _install(tmp_path / "spark")
    home = compiled_spark_home(install, tmp_path / "cache")
    assert home is not None and home.parent == tmp_path / "cache" and home.name.startswith("spark-home-")
    assert sorted(p.name for p in home.iterdir()) == ["bin", "jars", "python"]
    assert (home / "jars").is_symlink() and (home / "jars" / "spark-core.jar").read_bytes() == b"jar"
    assert (home / "python" / "README").is_symlink() and not (home / "python" / "lib").is_symlink()
    names = zipfile.ZipFile(home / "python" / "lib" / "pyspark.zip").namelist()
    assert names == ["pyspark/__init__.py", "pyspark/__init__.pyc", "pyspark/broken.py"]
    assert zipfile.ZipFile(home / "python" / "lib" / "py4j-src.zip").namelist() == ["py4j/__init__.py",
                                                                                     "py4j/__init__.pyc"]
    code = "import pyspark; print(pyspark.__spec__.loader.get_filename('pyspark'), pyspark.ANSWER)"
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60, check=True,
                         env={"PYTHONPATH": str(home / "python" / "lib" / "pyspark.zip")}).stdout.split()
    assert out == [f"{home / 'python' / 'lib' / 'pyspark.zip'}/pyspark/__init__.pyc", "42"]  # its bytecode
    assert compiled_spark_home(install, tmp_path / "cache") == home  # built once, then found


def test_an_install_whose_zip_changed_gets_a_mirror_of_its_own(tmp_path):
    first = compiled_spark_home(_install(tmp_path / "a"), tmp_path / "cache")
    second = compiled_spark_home(_install(tmp_path / "b"), tmp_path / "cache")  # another install path
    (tmp_path / "a" / "python" / "lib" / "pyspark.zip").unlink()
    with zipfile.ZipFile(tmp_path / "a" / "python" / "lib" / "pyspark.zip", "w") as zf:
        zf.writestr("pyspark/__init__.py", "ANSWER = 43\n")  # an upgrade in place
    third = compiled_spark_home(tmp_path / "a", tmp_path / "cache")
    assert len({first, second, third}) == 3


def test_without_zips_or_a_writable_cache_the_install_is_used_as_it_is(tmp_path, caplog):
    plain = tmp_path / "plain"
    (plain / "jars").mkdir(parents=True)
    assert compiled_spark_home(plain, tmp_path / "cache") is None
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory should be")
    with caplog.at_level(logging.WARNING):
        assert compiled_spark_home(_install(tmp_path / "spark"), blocked) is None
    assert "as it is" in caplog.text
