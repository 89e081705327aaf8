"""Zip the kafka_ferry package for spark-submit's ``--py-files``, so executors import exactly this code.

Executors on a cluster do not have the Airflow host's install; the zip is rebuilt from the package the
submitting process imports, named after its sources and this Python's bytecode tag so concurrent or repeated
builds never overwrite a zip a running job reads, and a batch whose zip exists builds nothing.

Each module is in the zip twice: its source, and its bytecode compiled by this Python. Why the bytecode:
Python never caches what it compiles from a zip, so without it the driver and every Python worker compiled
each module they import on every batch (its cost: docs/benchmarks.md). The bytecode is hash-checked
(PEP 552): the importer uses it only when its source hash matches the source beside it, and a Python of
another version (a cluster's executors) refuses its magic number and compiles the source, as before.

A zip found in the work dir is used only when its SHA-256 is the one this user recorded when it was built
(``KFERRY_PACKAGE_DIGEST_DIR``, default ``~/.cache/kafka-ferry/package-digests``, 0700 and this user's own).
Why: the work dir is shared (the API server reads it; other services mount it) and the zip runs with both
clusters' credentials, so a zip planted or edited there under the expected name must never be run. A zip
with no trusted record is checked by rebuilding it in memory (its bytes are reproducible), and replaced when
it differs. The same private directory keeps the zip's bytes under its source digest, so a new migration's first
batch on the host copies the zip another migration's batch built (checked against the recorded digest) instead
of compiling the package again. The directory the zip and the launcher are written to (``<local dir>/packages``)
must be this user's alone (``storage.private``), checked before either is used: a zip checked by digest could
otherwise be swapped between the check and spark-submit's read, and the launcher is run as it is found.

    python -m kafka_ferry.copy.packaging OUT_DIR
"""

from __future__ import annotations

import hashlib
import io
import marshal
import os
import sys
import zipfile
from collections.abc import Iterable
from importlib.util import MAGIC_NUMBER, source_hash
from pathlib import Path

import kafka_ferry
from kafka_ferry.storage.private import private_directory

FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # same sources -> same bytes -> same name
CHECKED_HASH_FLAGS = (0b11).to_bytes(4, "little")  # PEP 552: hash-based, checked against the source


def package_files(root: Path | None = None) -> list[tuple[Path, str]]:
    """(file, name inside the zip) of every .py file of the package, sorted."""
    root = Path(kafka_ferry.__file__).resolve().parent if root is None else root
    files = []
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        files.append((path, f"{root.name}/{path.relative_to(root).as_posix()}"))
    return files


DIGEST_DIR_ENV = "KFERRY_PACKAGE_DIGEST_DIR"
PACKAGES_WAY_OUT = ("Have this directory removed (the next batch writes it anew, 0700), or set KFERRY_LOCAL_DIR "
                    "(with an object-store work dir) / KFERRY_WORK_DIR to a directory of this user's")


def packages_directory(out_dir: str | Path) -> Path:
    """``out_dir``, this user's alone (made 0700 when missing), or ``UntrustedDirectory``."""
    return private_directory(out_dir, "the directory of the package zip and launcher spark-submit runs",
                             PACKAGES_WAY_OUT)


def build_package_zip(out_dir: str | Path) -> Path:
    """Write ``kafka_ferry-<hash>.zip`` into out_dir (reused when its digest checks) and return its path."""
    sources = [(name, path.read_bytes()) for path, name in package_files()]
    digest = hashlib.sha256(sys.implementation.cache_tag.encode())
    for name, text in sources:
        digest.update(b"%d:%s\0%d:" % (len(name), name.encode(), len(text)))
        digest.update(text)
    source_digest = digest.hexdigest()
    out_dir = packages_directory(out_dir)
    target = out_dir / f"kafka_ferry-{source_digest[:16]}.zip"
    trusted = _trusted_digest(source_digest)
    if trusted is not None and _file_digest(target) == trusted:
        return target
    data = _kept_zip(source_digest, trusted) or _zip_bytes(sources)
    expected = hashlib.sha256(data).hexdigest()
    _record_digest(source_digest, expected, data)
    if _file_digest(target) == expected:  # built earlier (by another user of the work dir): same bytes, kept
        return target
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(target)  # a zip that was there under this name and differs is replaced, never run
    return target


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _digest_dir() -> Path | None:
    """This user's private record of built zips' digests; None when it cannot be trusted (then: rebuild)."""
    path = Path(os.environ.get(DIGEST_DIR_ENV) or Path.home() / ".cache" / "kafka-ferry" / "package-digests")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o022:  # someone else may write there: not a trust anchor
        return None
    return path


def _trusted_digest(source_digest: str) -> str | None:
    directory = _digest_dir()
    if directory is None:
        return None
    try:
        return (directory / source_digest).read_text().strip() or None
    except OSError:
        return None


def _kept_zip(source_digest: str, trusted: str | None) -> bytes | None:
    """The zip this user built from these sources before (for any migration), if its bytes are the recorded ones.

    Why: every migration has a work dir of its own, so its first batch would compile the package again although
    the host built the same zip for another migration (its cost: docs/benchmarks.md)."""
    directory = _digest_dir()
    if directory is None or trusted is None:
        return None
    try:
        data = (directory / f"{source_digest}.zip").read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == trusted else None


def _record_digest(source_digest: str, zip_digest: str, data: bytes) -> None:
    """Record the zip's digest, and keep its bytes beside it for the next migration's first batch."""
    directory = _digest_dir()
    if directory is None:
        return
    for name, content in ((f"{source_digest}.zip", data), (source_digest, zip_digest.encode())):
        tmp = directory / f"{name}.{os.getpid()}.tmp"
        try:
            tmp.write_bytes(content)
            tmp.replace(directory / name)  # the bytes first: a recorded digest never names a missing zip
        except OSError:
            tmp.unlink(missing_ok=True)


def _zip_bytes(sources: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        write_with_bytecode(zf, sources)
    return buffer.getvalue()


def write_with_bytecode(zf: zipfile.ZipFile, entries: Iterable[tuple[str, bytes]],
                        compression: int = zipfile.ZIP_DEFLATED) -> None:
    """Write each entry into ``zf``; a ``.py`` entry also gets its hash-checked bytecode beside it (``.pyc``).

    A module that does not compile for this Python (a file meant for another version) is written as it is:
    the importer compiles it, or fails on it, exactly as it would without us."""
    for name, data in entries:
        zf.writestr(_entry(name, compression), data)
        if name.endswith(".py"):
            try:
                code = _bytecode(name, data)
            except (SyntaxError, ValueError):
                continue
            zf.writestr(_entry(name + "c", compression), code)


def _entry(name: str, compression: int = zipfile.ZIP_DEFLATED) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, FIXED_TIME)
    info.compress_type = compression
    return info


def _bytecode(name: str, text: bytes) -> bytes:
    """The module's hash-checked .pyc (PEP 552: magic, flags 0b11 = hash-based and checked, the source's hash,
    the marshalled code), byte for byte what ``py_compile`` writes with ``CHECKED_HASH``, without its round trip
    through files; its code names the file as the zip does (``kafka_ferry/...py``)."""
    code = compile(text, name, "exec", dont_inherit=True)
    return MAGIC_NUMBER + CHECKED_HASH_FLAGS + source_hash(text) + marshal.dumps(code)


LAUNCHER = "kafka_ferry_copy_batch.py"
LAUNCHER_SOURCE = ("# spark-submit's application file: the copy job is in the package (--py-files or installed)\n"
                   "import sys\n\nfrom kafka_ferry.copy.spark_job import main\n\nsys.exit(main())\n")


def write_launcher(out_dir: str | Path) -> Path:
    """The application file spark-submit runs: two lines importing the packaged job.

    Why not the module's own path: run as a script, a file's folder comes first on sys.path, and a
    package folder's modules would shadow same-named ones elsewhere; a launcher in its own folder cannot.
    """
    target = packages_directory(out_dir) / LAUNCHER
    if not target.exists() or target.read_text() != LAUNCHER_SOURCE:
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(LAUNCHER_SOURCE)
        tmp.replace(target)
    return target


if __name__ == "__main__":
    print(build_package_zip(sys.argv[1] if len(sys.argv) > 1 else "."))
