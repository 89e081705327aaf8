"""How the spark-submit driver JVM of a copy batch starts: pure decisions, no files, no processes.

A copy batch's driver JVM does almost no work (record data never enters the JVM; the driver schedules a
handful of tasks and collects small results), so its start is fixed cost paid by every batch. Two JVM
features cut it (figures: docs/benchmarks.md):

- ``-XX:TieredStopAtLevel=1`` (C1 only): the JVM stops spending CPU on optimising compilations that a
  job of seconds never profits from.
- An application class-data archive (JDK 13+ dynamic CDS): the classes Spark's driver loads, parsed and
  verified once, mapped from a file on every later start. The first batch on a host writes
  it (``-XX:ArchiveClassesAtExit``, a slower batch, once); later batches read it
  (``-XX:SharedArchiveFile``). A JVM that finds the archive unusable (another JVM build, another class
  path) says so in one warning line and starts without it: a stale archive costs time, never correctness.

Only where the driver JVM runs on this host (``local`` masters, and ``spark://`` in client mode): a
cluster-mode or Kubernetes driver starts elsewhere and is left alone. Options the deployment sets itself
come after ours (for the JVM the last flag wins); a deployment that manages CDS itself keeps its archive.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

FAST_START_FLAGS = ("-XX:TieredStopAtLevel=1",)
CDS_FLAGS = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare")
QUIET_DUMP = "-Xlog:cds=off,cds+dynamic=off"  # the dump's warnings list classes it skips: not the batch's news
DRIVER_OPTIONS_CONF = "spark.driver.extraJavaOptions"
ARCHIVE_DIR = "jvm"  # under the work root, beside the migrations' dirs: never a migration's name (core.specs.spec)


@dataclass(frozen=True)
class DriverStart:
    """What the copy task adds to spark-submit for the driver JVM; ``dump_to`` is set on the run that writes
    the archive (to a temporary name, moved to ``archive`` only after the job succeeded)."""

    java_options: str
    archive: str | None = None
    dump_to: str | None = None


def driver_runs_here(master: str, deploy_mode: str | None) -> bool:
    """True when spark-submit's own JVM is the driver: local masters, and standalone masters in client mode."""
    master = master.strip()
    if master.startswith("local"):
        return True
    return master.startswith("spark://") and (deploy_mode or "client") == "client"


def archive_name(jvm_identity: Mapping[str, str]) -> str:
    """The archive's file name for this JVM build and Spark install (their paths, sizes, times, versions):
    another JVM or Spark gets another file, never one written by a different pair."""
    digest = hashlib.sha256("\n".join(f"{k}={jvm_identity[k]}" for k in sorted(jvm_identity)).encode())
    return f"spark-driver-{digest.hexdigest()[:16]}.jsa"


def driver_start(master: str, deploy_mode: str | None, deployment_options: str | None, archive: str,
                 archive_ready: bool, dump_to: str) -> DriverStart | None:
    """The driver's JVM options for this batch, or None when the driver does not start on this host."""
    if not driver_runs_here(master, deploy_mode):
        return None
    theirs = (deployment_options or "").strip()  # verbatim: Spark parses its quotes, we never re-split them
    ours = list(FAST_START_FLAGS)
    if any(flag in theirs for flag in CDS_FLAGS):  # the deployment manages class data sharing itself
        return DriverStart(_joined(ours, theirs))
    if not _plain(archive) or not _plain(dump_to):  # Spark would split a path with a space; skip the archive
        return DriverStart(_joined(ours, theirs))
    if archive_ready:
        return DriverStart(_joined([*ours, f"-XX:SharedArchiveFile={archive}"], theirs), archive=archive)
    return DriverStart(_joined([*ours, f"-XX:ArchiveClassesAtExit={dump_to}", QUIET_DUMP], theirs),
                       archive=archive, dump_to=dump_to)


def _plain(path: str) -> bool:
    return bool(path) and not any(c.isspace() or c in "'\"\\" for c in path)


def _joined(ours: list[str], theirs: str) -> str:
    return " ".join([*ours, theirs]) if theirs else " ".join(ours)
