"""The zip shipped to executors holds the package's sources and their bytecode; the same sources give the same
zip; an importer uses the bytecode only where it matches its source and its Python."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import kafka_ferry
from kafka_ferry.copy.packaging import build_package_zip


def test_zip_holds_every_module_twice_and_is_reproducible(tmp_path):
    first = build_package_zip(tmp_path / "a")
    second = build_package_zip(tmp_path / "b")
    assert first.name == second.name and first.read_bytes() == second.read_bytes()
    names = zipfile.ZipFile(first).namelist()
    sources = {n for n in names if n.endswith(".py")}
    assert "kafka_ferry/__init__.py" in sources and "kafka_ferry/copy/partition_copier.py" in sources
    assert set(names) == sources | {n + "c" for n in sources}
    assert not [n for n in names if "__pycache__" in n]


def test_a_built_zip_is_reused_not_rewritten(tmp_path):
    package = build_package_zip(tmp_path)
    package.write_bytes(package.read_bytes())  # same bytes, new inode times
    before = package.stat().st_mtime_ns
    assert build_package_zip(tmp_path) == package and package.stat().st_mtime_ns == before


def test_a_fresh_interpreter_imports_the_copy_code_from_the_zips_bytecode(tmp_path):
    package = build_package_zip(tmp_path)
    assert _imported_from(package) == f"{package}/kafka_ferry/__init__.pyc"


def test_bytecode_that_does_not_match_its_source_is_not_used(tmp_path):
    package = build_package_zip(tmp_path)
    edited = _rewritten(package, tmp_path / "edited.zip",
                        {"kafka_ferry/__init__.py": lambda text: text + b"\nMARK = 'source'\n"})
    assert _imported_from(edited, "print(kafka_ferry.MARK)").splitlines() == [
        f"{edited}/kafka_ferry/__init__.py", "source"]


def test_bytecode_of_another_python_is_not_used(tmp_path):
    package = build_package_zip(tmp_path)
    other = _rewritten(package, tmp_path / "other.zip", {
        name: (lambda data: bytes([data[0] ^ 0xFF]) + data[1:])  # another magic number: another Python's bytecode
        for name in zipfile.ZipFile(package).namelist() if name.endswith(".pyc")})
    assert _imported_from(other) == f"{other}/kafka_ferry/__init__.py"


def _rewritten(package: Path, target: Path, edits: dict) -> Path:
    with zipfile.ZipFile(package) as src, zipfile.ZipFile(target, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            out.writestr(info, edits[info.filename](data) if info.filename in edits else data)
    return target


def _imported_from(package: Path, then: str = "") -> str:
    code = (f"import sys; sys.path.insert(0, {str(package)!r})\n"
            f"import kafka_ferry.copy.runner, kafka_ferry; print(kafka_ferry.__file__)\n{then}")
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": _site_packages()})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _site_packages() -> str:
    """confluent_kafka's location without the editable install's .pth (skipped by -S)."""
    import confluent_kafka

    return str(Path(confluent_kafka.__file__).parents[1])


def test_package_is_this_checkout():
    assert kafka_ferry.__file__.endswith("kafka_ferry/__init__.py")


# --- a zip found in the shared work dir is verified by digest before use (issue 24) -----------------------
def test_a_zip_planted_under_the_expected_name_is_replaced_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("KFERRY_PACKAGE_DIGEST_DIR", str(tmp_path / "digests"))
    genuine = build_package_zip(tmp_path / "a").read_bytes()
    for trusted_record in (True, False):  # with this user's record of the digest, and without one
        if not trusted_record:
            for record in (tmp_path / "digests").iterdir():
                record.unlink()
        planted = tmp_path / "work" / f"{trusted_record}" / build_package_zip(tmp_path / "a").name
        planted.parent.mkdir(parents=True)
        _rewritten(tmp_path / "a" / planted.name, planted, {
            "kafka_ferry/__init__.py": lambda text: text + b"\nimport os; os.system('id')\n"})
        assert planted.read_bytes() != genuine
        assert build_package_zip(planted.parent) == planted and planted.read_bytes() == genuine


def test_a_digest_dir_others_may_write_is_not_trusted(tmp_path, monkeypatch):
    shared = tmp_path / "digests"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.setenv("KFERRY_PACKAGE_DIGEST_DIR", str(shared))
    package = build_package_zip(tmp_path / "a")
    assert list(shared.iterdir()) == []  # nothing recorded where others could forge a record
    package.write_bytes(b"not the package")
    assert build_package_zip(tmp_path / "a").read_bytes() != b"not the package"


# --- a new migration's first batch copies the zip the host built before (its own work dir has none) ------------
def test_a_new_work_dir_gets_the_kept_zip_without_compiling(tmp_path, monkeypatch):
    from kafka_ferry.copy import packaging

    monkeypatch.setenv("KFERRY_PACKAGE_DIGEST_DIR", str(tmp_path / "digests"))
    genuine = build_package_zip(tmp_path / "first-migration").read_bytes()

    def no_compiling(*_args):
        raise AssertionError("compiled although the host kept this zip")

    monkeypatch.setattr(packaging, "_bytecode", no_compiling)
    assert build_package_zip(tmp_path / "second-migration").read_bytes() == genuine


def test_a_kept_zip_that_was_changed_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("KFERRY_PACKAGE_DIGEST_DIR", str(tmp_path / "digests"))
    genuine = build_package_zip(tmp_path / "first-migration").read_bytes()
    [kept] = (tmp_path / "digests").glob("*.zip")
    _rewritten(tmp_path / "first-migration" / build_package_zip(tmp_path / "first-migration").name, kept, {
        "kafka_ferry/__init__.py": lambda text: text + b"\nimport os; os.system('id')\n"})
    assert build_package_zip(tmp_path / "second-migration").read_bytes() == genuine


def test_the_bytecode_is_byte_for_byte_what_py_compile_writes_checked_hash(tmp_path):
    import py_compile

    from kafka_ferry.copy.packaging import _bytecode

    source = "# -*- coding: utf-8 -*-\nimport os\n\n\ndef f(x):\n    return {'é': x, 'pid': os.getpid()}\n"
    path = tmp_path / "m.py"
    path.write_text(source, encoding="utf-8")
    py_compile.compile(str(path), cfile=str(tmp_path / "m.pyc"), dfile="pkg/m.py", doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    assert _bytecode("pkg/m.py", source.encode()) == (tmp_path / "m.pyc").read_bytes()
