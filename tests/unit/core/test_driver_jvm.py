"""The spark-submit driver JVM's start options: where they apply, what they are, and that a deployment's own
options survive them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.batches.driver_jvm import archive_name, driver_runs_here, driver_start

ARCHIVE, DUMP = "/w/jvm/spark-driver-1.jsa", "/w/jvm/spark-driver-1.77-ab.tmp"


@pytest.mark.parametrize(("master", "deploy_mode", "here"), [
    ("local[2]", None, True), ("local", "client", True), (" local[*] ", None, True),
    ("spark://m:7077", None, True), ("spark://m:7077", "client", True), ("spark://m:7077", "cluster", False),
    ("k8s://https://k:6443", None, False), ("k8s://https://k:6443", "client", False), ("yarn", None, False),
    ("yarn", "client", False),
])
def test_only_a_driver_that_starts_on_this_host_is_tuned(master, deploy_mode, here):
    assert driver_runs_here(master, deploy_mode) is here
    assert (driver_start(master, deploy_mode, None, ARCHIVE, True, DUMP) is not None) is here


def test_the_first_batch_writes_the_archive_to_a_name_of_its_own_quietly():
    start = driver_start("local[2]", None, None, ARCHIVE, False, DUMP)
    assert start is not None
    assert start.java_options.split() == ["-XX:TieredStopAtLevel=1", f"-XX:ArchiveClassesAtExit={DUMP}",
                                          "-Xlog:cds=off,cds+dynamic=off"]
    assert (start.archive, start.dump_to) == (ARCHIVE, DUMP)


def test_later_batches_read_the_archive_and_write_nothing():
    start = driver_start("spark://m:7077", "client", None, ARCHIVE, True, DUMP)
    assert start is not None
    assert start.java_options == f"-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile={ARCHIVE}"
    assert (start.archive, start.dump_to) == (ARCHIVE, None)


def test_the_deployments_options_come_last_verbatim_so_they_win():
    theirs = '-Xmx2g -Dmsg="a b" -XX:TieredStopAtLevel=4'
    start = driver_start("local[2]", None, theirs, ARCHIVE, True, DUMP)
    assert start is not None
    assert start.java_options.endswith(" " + theirs)
    assert start.java_options.startswith("-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile=")


@pytest.mark.parametrize("theirs", ["-Xshare:off", "-XX:SharedArchiveFile=/theirs.jsa",
                                    "-Xmx1g -XX:ArchiveClassesAtExit=/theirs.jsa"])
def test_a_deployment_that_manages_class_data_sharing_keeps_it(theirs):
    for ready in (True, False):
        start = driver_start("local[2]", None, theirs, ARCHIVE, ready, DUMP)
        assert start is not None
        assert start.java_options == f"-XX:TieredStopAtLevel=1 {theirs}"
        assert (start.archive, start.dump_to) == (None, None)


@pytest.mark.parametrize(("archive", "dump"), [("/work dir/jvm/a.jsa", "/work dir/jvm/a.1.tmp"),
                                               ('/w/"q"/a.jsa', '/w/"q"/a.1.tmp'), ("", DUMP)])
def test_an_archive_path_spark_would_split_is_not_used(archive, dump):
    start = driver_start("local[2]", None, None, archive, False, dump)
    assert start is not None
    assert start.java_options == "-XX:TieredStopAtLevel=1" and start.dump_to is None


@given(st.dictionaries(st.sampled_from(["java", "libjvm", "jars", "spark_home", "SPARK_CONF_DIR"]),
                       st.text(max_size=20), min_size=1))
def test_the_archive_name_is_a_function_of_the_whole_identity(identity):
    name = archive_name(identity)
    assert name == archive_name(dict(reversed(list(identity.items()))))
    assert name.startswith("spark-driver-") and name.endswith(".jsa") and "/" not in name
    changed = {**identity, next(iter(identity)): next(iter(identity.values())) + "'"}
    assert archive_name(changed) != name
