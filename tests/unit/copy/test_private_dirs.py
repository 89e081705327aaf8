"""What the copy task runs from disk is this user's alone (issue 36 case 2): the Spark home mirror, the driver's
class-data archive, the launcher and the package zip live in directories owned by this user and writable by no
one else; a directory or entry someone else made or can write is refused, naming path, owner and mode, and
nothing in it is used.

Before: ``<work>/jvm`` was made with ``exist_ok`` whoever owned it, and a mirror found there was run as it was.
"Another user" is a real other owner: run as root (CI), the test gives its directory to another uid; run as anyone else,
it meets root's home.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zipfile
from pathlib import Path

import pytest
from test_spark_home import _install

from kafka_ferry.copy.jvm_archive import DriverArchive
from kafka_ferry.copy.packaging import build_package_zip, write_launcher
from kafka_ferry.copy.spark_home import _digest, compiled_spark_home
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.storage.private import UntrustedDirectory, private_directory

WAY_OUT = "Set KFERRY_JVM_ARCHIVE_DIR to a directory of this user's"


def planted_mirror(install: Path, cache: Path) -> Path:
    """A mirror under the name the copy would look for, whose bin/spark-class is someone else's program."""
    zips = sorted((install / "python" / "lib").glob("*.zip"))
    target = cache / f"spark-home-{_digest(install, zips)}"
    (target / "python" / "lib").mkdir(parents=True)
    (target / "bin").mkdir()
    (target / "bin" / "spark-class").write_text("#!/bin/sh\necho planted\n")
    return target


def _mode(path: Path) -> str:
    return f"mode {stat.S_IMODE(os.lstat(path).st_mode):04o}"


def test_a_mirror_planted_in_a_directory_others_can_write_is_refused_naming_path_owner_and_mode(tmp_path):
    install, cache = _install(tmp_path / "spark"), tmp_path / "jvm"
    planted = planted_mirror(install, cache)
    cache.chmod(0o777)  # a shared work dir's jvm/: anyone could have put the mirror there
    with pytest.raises(UntrustedDirectory) as err:
        compiled_spark_home(install, cache)
    message = str(err.value)
    assert message.startswith(f"the Spark home mirrors' directory: {cache} (owner ")
    assert f"{_mode(cache)}) is writable by its group or by others; the copy runs code from it" in message
    assert WAY_OUT in message and isinstance(err.value, Permanent)  # fails once, naming the way out
    assert (planted / "bin" / "spark-class").read_text().endswith("planted\n")  # left as found, never run


def test_a_mirror_others_can_write_is_refused_even_in_a_private_directory(tmp_path):
    install, cache = _install(tmp_path / "spark"), tmp_path / "jvm"
    planted = planted_mirror(install, cache)
    cache.chmod(0o700)
    planted.chmod(0o775)
    with pytest.raises(UntrustedDirectory, match=re.escape(f"a Spark home mirror: {planted} (owner ")):
        compiled_spark_home(install, cache)


def test_a_directory_of_another_user_is_refused_naming_its_owner(tmp_path):
    install, cache = _install(tmp_path / "spark"), tmp_path / "jvm"
    cache.mkdir(mode=0o700)
    me = os.geteuid()
    if me == 0:  # root (CI) gives the directory away: a real directory of another uid
        os.chown(cache, me + 4242, -1)
    else:  # anyone else meets one: root's home, root's alone
        cache = Path("/root")
    st = os.lstat(cache)
    with pytest.raises(UntrustedDirectory) as err:
        compiled_spark_home(install, cache)
    # the owner and this user, each by uid (and name where it has one), and the mode
    assert re.search(rf"\(owner (\S+ \()?uid {st.st_uid}\)?, mode {stat.S_IMODE(st.st_mode):04o}\) is not owned by "
                     rf"this user \((\S+ \()?uid {me}\)\)?", str(err.value)), str(err.value)


def test_a_symlinked_directory_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "jvm").symlink_to(elsewhere)
    with pytest.raises(UntrustedDirectory, match="is a symbolic link"):
        compiled_spark_home(_install(tmp_path / "spark"), tmp_path / "jvm")


def test_a_missing_directory_is_made_this_users_alone_and_then_used(tmp_path):
    install, cache = _install(tmp_path / "spark"), tmp_path / "work" / "jvm"
    home = compiled_spark_home(install, cache)
    assert home is not None and home.parent == cache and stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert compiled_spark_home(install, cache) == home


def test_a_class_data_archive_planted_where_others_can_write_is_never_mapped(tmp_path):
    archive = DriverArchive(tmp_path / "work", {"SPARK_HOME": str(tmp_path / "spark"), "PATH": "/nowhere"})
    archive.directory.mkdir(parents=True)
    archive.path.write_bytes(b"someone else's classes")
    archive.directory.chmod(0o777)
    with pytest.raises(UntrustedDirectory) as err:
        archive.start("local[2]", None, None)
    assert str(err.value).startswith(f"the driver JVM's class-data archive directory: {archive.directory} (owner ")
    archive.directory.chmod(0o700)
    archive.path.chmod(0o666)
    with pytest.raises(UntrustedDirectory, match=re.escape(f"the driver JVM's class-data archive: {archive.path}")):
        archive.start("local[2]", None, None)
    archive.path.chmod(0o600)
    start = archive.start("local[2]", None, None)
    assert start is not None and f"-XX:SharedArchiveFile={archive.path}" in start.java_options
    assert archive.start("yarn", None, None) is None  # a driver elsewhere reads nothing here


def test_the_launcher_and_the_package_zip_are_written_only_to_a_directory_of_this_users(tmp_path):
    packages = tmp_path / "work" / "m" / "packages"
    packages.mkdir(parents=True, mode=0o700)
    packages.chmod(0o777)
    (packages / "kafka_ferry_copy_batch.py").write_text("print('planted')\n")
    for write in (write_launcher, build_package_zip):
        with pytest.raises(UntrustedDirectory, match=re.escape(f"{packages} (owner ")):
            write(packages)
    assert (packages / "kafka_ferry_copy_batch.py").read_text() == "print('planted')\n"
    packages.chmod(0o700)
    assert zipfile.is_zipfile(build_package_zip(packages))
    assert "kafka_ferry.copy.spark_job" in write_launcher(packages).read_text()


def test_private_directory_checks_what_it_finds_and_makes_what_is_missing(tmp_path):
    made = private_directory(tmp_path / "a" / "b", "x", "y")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    (tmp_path / "f").write_text("")
    with pytest.raises(NotADirectoryError):  # this user's own file in the way: the caller's fallback, not a refusal
        private_directory(tmp_path / "f", "x", "y")


def test_the_copy_task_refuses_a_shared_archive_directory_before_submitting(tmp_path, monkeypatch):
    """Through the operator, as the DAG runs it: KFERRY_JVM_ARCHIVE_DIR names a directory others can write."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_ferry.operators.copy import CopyBatchSparkOperator

    shared = tmp_path / "shared-jvm"
    shared.mkdir()
    shared.chmod(0o1777)  # even sticky: anyone may create the mirror's name first
    monkeypatch.setenv("KFERRY_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setenv("KFERRY_JVM_ARCHIVE_DIR", str(shared))
    monkeypatch.setenv("SPARK_HOME", str(_install(tmp_path / "spark")))
    for conn in ("kf_p_source", "kf_p_destination"):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn.upper()}", json.dumps({"conn_type": "kafka", "extra": {
            "bootstrap.servers": "b:9094"}}))
    monkeypatch.setenv("AIRFLOW_CONN_KF_P_SPARK", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    submitted: list[str] = []

    def submit(hook: SparkSubmitHook, application: str = "", **kwargs: object) -> str | None:
        """``SparkSubmitHook.submit`` as declared: records what would be submitted, starts no spark-submit."""
        submitted.append(application)
        return None

    monkeypatch.setattr(SparkSubmitHook, "submit", submit)
    spec_path = tmp_path / "m.yaml"
    spec_path.write_text(json.dumps({
        "name": "m", "tenant": "t", "source": {"connection_id": "kf_p_source", "alias": "a"},
        "destination": {"connection_id": "kf_p_destination", "alias": "b"}, "topics": {"include": ["x"]},
        "copy": {"spark_connection_id": "kf_p_spark"}}))
    # a batch id the planner makes, its files derived from the work dir (copy.plan.batch_files)
    batch_id = "batch-" + "0" * 20
    summary = {"empty": False, "batch_id": batch_id,
               "plan_path": str(tmp_path / "work" / "m" / f"plan-{batch_id}.json"),
               "report_path": str(tmp_path / "work" / "m" / f"report-{batch_id}.json")}

    class TI:
        def xcom_pull(self, task_ids):
            return summary

    op = CopyBatchSparkOperator(task_id="copy_batch", spec_path=str(spec_path), conn_id="kf_p_spark")
    with pytest.raises(AirflowFailException, match=re.escape(f"Spark home mirrors' directory: {shared} (owner ")):
        op.execute({"ti": TI()})
    assert submitted == [] and list(shared.iterdir()) == []
