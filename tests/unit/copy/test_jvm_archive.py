"""The driver JVM's archive on the host: which JVM and Spark it belongs to, where it lives, and that only a
succeeded job's archive goes into place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafka_ferry.copy.jvm_archive import DriverArchive, jvm_identity


@pytest.fixture()
def host(tmp_path) -> dict[str, str]:
    """A JAVA_HOME and a SPARK_HOME of files, as spark-class finds them."""
    java_home, spark_home = tmp_path / "jdk", tmp_path / "spark"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "lib" / "server").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("java")
    (java_home / "bin" / "java").chmod(0o755)
    (java_home / "lib" / "server" / "libjvm.so").write_text("jvm")
    (spark_home / "jars").mkdir(parents=True)
    (spark_home / "conf").mkdir()
    for jar in ("spark-core_2.13-4.2.0.jar", "scala-library-2.13.16.jar"):
        (spark_home / "jars" / jar).write_text("")
    return {"JAVA_HOME": str(java_home), "SPARK_HOME": str(spark_home), "PATH": "/nowhere"}


def test_another_jvm_build_or_spark_install_gets_another_archive(host, tmp_path):
    first = DriverArchive(tmp_path / "work", host).path
    assert first.parent == tmp_path / "work" / "jvm"
    libjvm = Path(host["JAVA_HOME"]) / "lib" / "server" / "libjvm.so"
    libjvm.write_text("jvm, patched")  # an in-place JVM upgrade
    assert DriverArchive(tmp_path / "work", host).path != first
    patched = DriverArchive(tmp_path / "work", host).path
    (Path(host["SPARK_HOME"]) / "jars" / "spark-core_2.13-4.2.0.jar").rename(
        Path(host["SPARK_HOME"]) / "jars" / "spark-core_2.13-4.2.1.jar")
    assert DriverArchive(tmp_path / "work", host).path not in (first, patched)
    assert DriverArchive(tmp_path / "work", {**host, "SPARK_CONF_DIR": "/etc/spark"}).path not in (first, patched)


def test_the_identity_names_the_java_spark_submit_would_run(host, tmp_path):
    identity = jvm_identity(host)
    assert identity["java"].startswith(f"{Path(host['JAVA_HOME']).resolve()}/bin/java:4:")
    assert identity["jars"] == "scala-library-2.13.16.jar,spark-core_2.13-4.2.0.jar"
    without_home = {k: v for k, v in host.items() if k != "JAVA_HOME"}
    assert jvm_identity({**without_home, "PATH": str(Path(host["JAVA_HOME"]) / "bin")})["java"] == identity["java"]
    assert jvm_identity(without_home)["java"] == "none"  # no java at all: spark-submit fails on its own


def test_an_env_dir_holds_the_archive_for_every_work_dir(host, tmp_path):
    archive = DriverArchive(tmp_path / "work", {**host, "KFERRY_JVM_ARCHIVE_DIR": str(tmp_path / "shared")})
    assert archive.path.parent == tmp_path / "shared"


def test_a_succeeded_jobs_archive_goes_into_place_and_later_batches_read_it(host, tmp_path):
    archive = DriverArchive(tmp_path / "work", host)
    start = archive.start("local[2]", None, None)
    assert start is not None and start.dump_to and Path(start.dump_to).parent == archive.path.parent
    assert os.stat(archive.path.parent).st_mode & 0o777 == 0o700
    Path(start.dump_to).write_bytes(b"classes")  # what the JVM writes at exit
    archive.settle(start, succeeded=True)
    assert archive.path.read_bytes() == b"classes" and not Path(start.dump_to).exists()
    later = archive.start("local[2]", None, None)
    assert later is not None and later.dump_to is None and f"-XX:SharedArchiveFile={archive.path}" in later.java_options


@pytest.mark.parametrize(("succeeded", "written"), [(False, b"classes"), (True, b""), (True, None)])
def test_a_failed_job_or_an_empty_dump_leaves_no_archive_and_no_scrap(host, tmp_path, succeeded, written):
    archive = DriverArchive(tmp_path / "work", host)
    start = archive.start("local[2]", None, None)
    if written is not None:
        assert start is not None and start.dump_to is not None
        Path(start.dump_to).write_bytes(written)
    archive.settle(start, succeeded=succeeded)
    assert list(archive.path.parent.iterdir()) == []


def test_settling_a_batch_that_wrote_nothing_changes_nothing(host, tmp_path):
    archive = DriverArchive(tmp_path / "work", host)
    archive.settle(None, succeeded=True)
    archive.settle(archive.start("k8s://https://k:6443", None, None), succeeded=True)
    assert not archive.path.parent.exists()


def test_spark_defaults_are_read_as_spark_reads_them(host, tmp_path):
    (Path(host["SPARK_HOME"]) / "conf" / "spark-defaults.conf").write_text(
        "# admin settings\n"
        "spark.driver.extraJavaOptions   -Dx=1 -Dy=\"a b\"\n"
        "spark.executor.memory=2g\n"
        "spark.ui.enabled : false\n"
        "! also a comment\n\n")
    assert DriverArchive(tmp_path / "work", host).spark_defaults() == {
        "spark.driver.extraJavaOptions": '-Dx=1 -Dy="a b"', "spark.executor.memory": "2g",
        "spark.ui.enabled": "false"}
    conf_dir = tmp_path / "etc-spark"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -Dz=3\n")
    assert DriverArchive(tmp_path / "work", {**host, "SPARK_CONF_DIR": str(conf_dir)}).spark_defaults() == {
        "spark.driver.extraJavaOptions": "-Dz=3"}
    assert DriverArchive(tmp_path / "work", {**host, "SPARK_CONF_DIR": str(tmp_path / "none")}).spark_defaults() == {}
