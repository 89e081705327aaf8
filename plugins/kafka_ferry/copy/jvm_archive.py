"""The spark-submit driver JVM's class-data archive on this host (``core.batches.driver_jvm`` decides the flags):
where it lives, which JVM and Spark install it belongs to, and moving a freshly written one into place.

One archive per JVM build and Spark install, shared by every migration on the host, under the work root
(``storage.workdir.local_base()/jvm``: the work dir when it is local, else ``$KFERRY_LOCAL_DIR`` - a JVM maps
the archive, so it is a file on this host even when the work dir is in object storage) unless
``$KFERRY_JVM_ARCHIVE_DIR`` names a directory (a volume that outlives the worker's work dir, say). The batch
that finds none writes one to a name of its own and moves it into place only after its job succeeded
(``os.replace``: a reader sees the old file or the whole new one); two first batches at once each write their
own and the last move wins. The directory and the archive must be this user's alone (``storage.private``): the JVM
maps the archive's classes, so one someone else made or can write is refused, naming path, owner and mode.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from kafka_ferry.copy.spark_home import WAY_OUT, compiled_spark_home, spark_home
from kafka_ferry.core.batches.driver_jvm import (
    ARCHIVE_DIR,
    DRIVER_OPTIONS_CONF,
    DriverStart,
    archive_name,
    driver_runs_here,
    driver_start,
)
from kafka_ferry.storage.private import check_entry, private_directory

log = logging.getLogger(__name__)
ARCHIVE_DIR_ENV = "KFERRY_JVM_ARCHIVE_DIR"
PROPERTY = re.compile(r"(?P<key>[^\s=:]+)\s*[\s=:]\s*(?P<value>.*)")


def jvm_identity(environ: Mapping[str, str]) -> dict[str, str]:
    """What the archive belongs to, as spark-submit will find it: the java binary and libjvm (path, size,
    time), the Spark install's jars (names carry versions), and the config dirs on the driver's class path."""
    java_home = environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java", path=environ.get("PATH"))
    identity = {"java": _stat(Path(java).resolve()) if java else "none"}
    if java:
        identity["libjvm"] = _stat(Path(java).resolve().parent.parent / "lib" / "server" / "libjvm.so")
    home = spark_home(environ)
    jars = home / "jars"
    identity["spark_home"] = str(home.resolve())
    identity["jars"] = ",".join(sorted(p.name for p in jars.glob("*.jar"))) if jars.is_dir() else "none"
    for name in ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR"):
        identity[name] = environ.get(name, "")
    return identity


def _stat(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


class DriverArchive:
    """The archive of this host's JVM and Spark under ``root``; ``start`` gives a batch its driver options,
    ``settle`` keeps (or drops) what the batch wrote."""

    def __init__(self, root: str | Path, environ: Mapping[str, str] | None = None) -> None:
        self.environ = dict(os.environ if environ is None else environ)
        self.directory = Path(self.environ.get(ARCHIVE_DIR_ENV) or Path(root) / ARCHIVE_DIR)
        self.path = self.directory / archive_name(jvm_identity(self.environ))

    def start(self, master: str, deploy_mode: str | None, deployment_options: str | None) -> DriverStart | None:
        dump_to = self.path.with_name(f"{self.path.stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
        ready = False
        if driver_runs_here(master, deploy_mode):  # the JVM maps this file: ours only, checked before it is used
            private_directory(self.directory, "the driver JVM's class-data archive directory", WAY_OUT)
            ready = check_entry(self.path, "the driver JVM's class-data archive", WAY_OUT, directory=False)
        return driver_start(master, deploy_mode, deployment_options, str(self.path), ready, str(dump_to))

    def spark_defaults(self) -> dict[str, str]:
        """The deployment's ``spark-defaults.conf``, which a ``--conf`` of the same key would replace: read so its
        driver options are kept after ours."""
        return spark_defaults(self.environ)

    def settle(self, start: DriverStart | None, succeeded: bool) -> None:
        """After the job: a written archive of a succeeded job goes into place; any other is removed."""
        if start is None or not start.dump_to or not start.archive:  # a dump always names its archive
            return
        written = Path(start.dump_to)
        if succeeded and written.is_file() and written.stat().st_size > 0:
            os.replace(written, start.archive)
            log.info("driver JVM class-data archive written: %s (later batches on this host start faster)",
                     start.archive)
        else:
            written.unlink(missing_ok=True)


def spark_defaults(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings of the ``spark-defaults.conf`` spark-submit reads in ``environ`` (``$SPARK_CONF_DIR`` or
    ``$SPARK_HOME/conf``); empty when there is none."""
    conf_dir = environ.get("SPARK_CONF_DIR") or str(spark_home(environ) / "conf")
    try:
        lines = (Path(conf_dir) / "spark-defaults.conf").read_text().splitlines()
    except OSError:
        return {}
    settings = {}
    for line in map(str.strip, lines):  # Spark reads it as Java properties: "key value", "key=value", '#'
        pair = None if line.startswith(("#", "!")) else PROPERTY.match(line)
        if pair:
            settings[pair["key"]] = pair["value"].strip()
    return settings


def launch_environment(work_root: Path, master: str, deploy_mode: str | None,
                       env: Mapping[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(the environment spark-submit will run in, what the task adds to its own for that): where the driver
    starts on this host, ``SPARK_HOME`` is the install's compiled mirror (``copy.spark_home``); the driver's
    archive belongs to the class path that environment gives the JVM. ``env``: the task's own environment for
    spark-submit, over this process's."""
    environ = {**os.environ, **(env or {})}
    if not driver_runs_here(master, deploy_mode):
        return environ, {}
    directory = Path(environ.get(ARCHIVE_DIR_ENV) or Path(work_root) / ARCHIVE_DIR)
    compiled = compiled_spark_home(spark_home(environ), directory)
    added = {} if compiled is None else {"SPARK_HOME": str(compiled)}
    return {**environ, **added}, added


@contextmanager
def driver_options(work_root: Path, enabled: bool, master: str, deploy_mode: str | None,
                   conf: Mapping[str, str] | None,
                   env: Mapping[str, str] | None = None) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """The driver's start for one spark-submit run, as (Spark conf, environment) to add; both empty when the spec
    turns fast starts off (``launch_environment``). After the run, a freshly written archive goes into place only
    if the run succeeded (``settle``)."""
    if not enabled:
        yield {}, {}
        return
    environ, added = launch_environment(work_root, master, deploy_mode, env)
    archive = DriverArchive(work_root, environ)
    theirs = (conf or {}).get(DRIVER_OPTIONS_CONF) or archive.spark_defaults().get(DRIVER_OPTIONS_CONF)
    start = archive.start(master, deploy_mode, theirs)
    succeeded = False
    try:
        yield ({DRIVER_OPTIONS_CONF: start.java_options} if start else {}), added
        succeeded = True
    finally:
        archive.settle(start, succeeded)
