"""Fixtures of the integration tests: a work dir per test, spark-submit on PATH, both clusters' configs, the stop of
every DAG process a test's workspaces started."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def work_dir(tmp_path, monkeypatch) -> Path:
    """Plans, reports and package zips of this test only (KFERRY_WORK_DIR)."""
    path = tmp_path / "work"
    monkeypatch.setenv("KFERRY_WORK_DIR", str(path))
    return path


@pytest.fixture(scope="session")
def spark_on_path():
    """Tests that run spark-submit themselves need the venv's (pyspark's) on PATH; the copy task finds it alone."""
    bin_dir = str(Path(sys.executable).parent)
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([bin_dir, old])
    yield bin_dir
    os.environ["PATH"] = old


@pytest.fixture(scope="session")
def cluster_configs(clusters) -> dict:
    """The configs the DAG's copy task would hand to the Spark job (from the same Airflow connections)."""
    return {side: clusters.cluster(side).client_config for side in ("source", "destination")}


@pytest.fixture(scope="session")
def configs_env(cluster_configs) -> str:
    """KFERRY_CLUSTER_CONFIGS as the copy task sets it for the job."""
    from kafka_ferry.kafka.configs import encode_cluster_configs

    return encode_cluster_configs(cluster_configs["source"], cluster_configs["destination"])


STANDALONE_CONN = "kf_test_spark_standalone"


@pytest.fixture(scope="session")
def spark_standalone(spark_on_path) -> Iterator[str]:
    """A master and two 1-core workers (testbed/spark_cluster.py); the Airflow connection id onto it.

    Started here unless already running, and then stopped at the end of the session.
    """
    import json

    import spark_cluster

    started_here = spark_cluster.master_state() is None
    spark_cluster.up(workers=2)
    os.environ[f"AIRFLOW_CONN_{STANDALONE_CONN.upper()}"] = json.dumps(
        {"conn_type": "spark", "host": f"spark://{spark_cluster.HOST}", "port": spark_cluster.MASTER_PORT})
    yield STANDALONE_CONN
    if started_here:
        spark_cluster.down()


CONNECT_CONN = "kf_test_spark_connect"


@pytest.fixture(scope="session")
def spark_connect(spark_on_path) -> Iterator[str]:
    """A Spark Connect server (testbed/spark_connect.py, local[2]); the Airflow connection id onto it.

    Started here unless already answering, and then stopped at the end of the session.
    """
    import json

    import spark_connect as connect_server

    started_here = not connect_server.answers()
    connect_server.up(cores=2)
    os.environ[f"AIRFLOW_CONN_{CONNECT_CONN.upper()}"] = json.dumps(
        {"conn_type": "spark_connect", "host": connect_server.HOST, "port": connect_server.PORT})
    yield CONNECT_CONN
    if started_here:
        connect_server.down()


@pytest.fixture(scope="session")
def registries():
    """The test bed's schema registries (testbed/schema_registries.py), started once for the session if they are
    not running; the ones started here are stopped at its end (by pid), unless KFERRY_KEEP_TESTBED is set."""
    import schema_registries as srtb

    started = tuple(spec for spec in srtb.REGISTRIES if not srtb.answers(spec))
    if started:
        srtb.up(started)
    try:
        yield srtb
    finally:
        if not os.environ.get("KFERRY_KEEP_TESTBED"):
            for spec in started:
                srtb.stop(spec)


@pytest.fixture(scope="module")
def axon_pair():
    """A source and a destination AxonOps registry (fast to start) on this session's helper ports
    (KFERRY_HELPER_PORT_BASE + 10 / + 11), for the remap rollback tests; the ones started here are stopped by pid
    at the module's end."""
    import schema_registries as srtb

    base = int(os.environ.get("KFERRY_HELPER_PORT_BASE", "17400"))
    specs = (srtb.RegistrySpec("rollback-remap-source", "axonops", base + 10),
             srtb.RegistrySpec("rollback-remap-destination", "axonops", base + 11))
    started = []
    try:
        for spec in specs:
            if not srtb.answers(spec):
                srtb.start(spec)
                started.append(spec)
        for spec in specs:
            srtb.wait_ready(spec)
        yield specs
    finally:
        for spec in started:
            srtb.stop(spec)


@pytest.fixture(autouse=True)
def stop_workspaces():
    """After each test, passed or failed: the DAG processes its ``route_support.Workspace``s started, stopped by pid."""
    yield
    route_support = sys.modules.get("route_support")  # loaded only by the tests that use it
    while route_support is not None and route_support.OPEN:
        route_support.OPEN.pop().close()
