"""The Spark install a local spark-submit runs from, with its Python library compiled: one per host and install.

Why: Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on the Python path of the driver and
of every Python worker it starts, ahead of the site-packages where pip installed pyspark with its bytecode. The
zips hold sources only, and Python never caches what it compiles from a zip, so the driver and each batch's Python
worker daemon compiled pyspark's modules again on every batch (its cost: docs/benchmarks.md).

This module keeps, under the host's JVM archive directory (``copy.jvm_archive``: a local directory of this user),
a mirror of the install: every entry is a symlink to the real one except ``python/lib``, whose zips are rebuilt
with hash-checked bytecode beside each module (``packaging.write_with_bytecode``: a Python of another version
ignores it and compiles the source, as before). The copy task runs spark-submit with ``SPARK_HOME`` pointing at the
mirror, so jars, scripts and ``conf`` are the install's own. The mirror's name is a digest of the install's path,
of its zips' bytes and of this Python's bytecode tag: an upgraded pyspark or another Python gets another mirror,
never one built from other files. It is built in a scratch directory and renamed into place (two first batches at
once each build one; the first rename wins, the other is dropped). Anything in the way (no zips, a read-only
disk) leaves the install as it is: a slower start, never a failed batch. What is never used is a mirror in a
directory this user does not own alone (``storage.private``): spark-submit runs the mirror's ``bin/spark-class``
with both clusters' credentials, so a directory or mirror another user made or can write is refused, naming its
path, owner and mode.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import uuid
import zipfile
from collections.abc import Mapping
from pathlib import Path

from kafka_ferry.copy.packaging import write_with_bytecode
from kafka_ferry.storage.private import check_entry, private_directory

log = logging.getLogger(__name__)
PYTHON_LIB = Path("python") / "lib"
LAYOUT = "stored-zips-1"  # how a mirror is built: a mirror built another way gets another name
WAY_OUT = ("Set KFERRY_JVM_ARCHIVE_DIR to a directory of this user's (made 0700 when missing), or have this one "
           "removed (a cache: the next batch rebuilds it)")


def spark_home(environ: Mapping[str, str]) -> Path:
    """The Spark install spark-submit runs from: ``$SPARK_HOME``, else the pip-installed pyspark's."""
    if environ.get("SPARK_HOME"):
        return Path(environ["SPARK_HOME"])
    import pyspark  # the pip-installed Spark that pyspark's spark-submit runs

    return Path(pyspark.__file__).parent


def compiled_spark_home(install: Path, cache_dir: Path) -> Path | None:
    """The mirror of ``install`` with compiled Python zips (built on first use); None when it cannot be had."""
    zips = sorted((install / PYTHON_LIB).glob("*.zip"))
    if not zips:
        return None  # not a Spark install whose Python library comes as zips: nothing to gain
    try:
        private_directory(cache_dir, "the Spark home mirrors' directory", WAY_OUT)
        target = cache_dir / f"spark-home-{_digest(install, zips)}"
        if check_entry(target, "a Spark home mirror", WAY_OUT, directory=True) and (target / PYTHON_LIB).is_dir():
            return target
        return _build(install, zips, target)
    except (OSError, zipfile.BadZipFile) as exc:
        log.warning("spark-submit runs from %s as it is: its compiled mirror could not be built (%s)", install, exc)
        return None


def _digest(install: Path, zips: list[Path]) -> str:
    digest = hashlib.sha256(f"{install.resolve()}\0{sys.implementation.cache_tag}\0{LAYOUT}\0".encode())
    for path in zips:
        digest.update(path.name.encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def _build(install: Path, zips: list[Path], target: Path) -> Path:
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # code runs from here: this user's only
    scratch = target.with_name(f"{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        _mirror(install, scratch, keep={PYTHON_LIB.parts[0]})
        _mirror(install / PYTHON_LIB.parts[0], scratch / PYTHON_LIB.parts[0], keep={PYTHON_LIB.parts[1]})
        _mirror(install / PYTHON_LIB, scratch / PYTHON_LIB, keep={z.name for z in zips})
        for path in zips:
            # Stored, not deflated: it never leaves this host, and an import then reads its bytes as they are.
            with zipfile.ZipFile(path) as source, zipfile.ZipFile(scratch / PYTHON_LIB / path.name, "w") as compiled:
                write_with_bytecode(compiled, ((i.filename, source.read(i)) for i in source.infolist()
                                               if not i.is_dir()), compression=zipfile.ZIP_STORED)
        try:
            scratch.rename(target)
        except OSError:
            if not (target / PYTHON_LIB).is_dir():  # not "another batch built it first"
                raise
        log.info("spark-submit runs from %s: %s with its Python library compiled (later batches on this host "
                 "start faster)", target, install)
        return target
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _mirror(source: Path, target: Path, keep: set[str]) -> None:
    """``target`` as a directory of symlinks to ``source``'s entries, except the names in ``keep`` (made by the
    caller: a directory, or nothing for a zip it writes)."""
    target.mkdir(parents=True)
    for entry in sorted(source.iterdir()):
        if entry.name not in keep:
            (target / entry.name).symlink_to(entry.resolve())


def main(argv: list[str] | None = None) -> int:
    """``python -m kafka_ferry.copy.spark_home CACHE_DIR [SPARK_HOME]``: print the compiled mirror of the install
    (default: ``$SPARK_HOME``, else pip's pyspark), building it when missing; the install itself when none can be had.
    For a platform's long-running Spark servers (Connect, standalone workers): start them with this ``SPARK_HOME``
    and their Python workers import pyspark's bytecode too."""
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print(main.__doc__, file=sys.stderr)
        return 2
    install = Path(args[1]) if len(args) == 2 else spark_home(os.environ)
    print(compiled_spark_home(install, Path(args[0])) or install)
    return 0


if __name__ == "__main__":
    sys.exit(main())
