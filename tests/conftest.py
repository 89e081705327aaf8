"""Shared fixtures: the real two-cluster test bed and clients onto it.

Integration tests use a running test bed (`make testbed-up`) or start their own and stop it afterwards.
Tests never build client configs themselves: they ask the `clusters` fixture for producers, admin
clients, hooks and unique topic names.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]
# No time limit per generated case: a case that takes 240 ms on a loaded 2-core CI machine instead of 200 ms is not a
# failure of the code (a time limit is a timed assertion; the examples still run, and a slow-down shows in the
# suite's durations). Each test's own @settings (max_examples) still applies.
settings.register_profile("kafka-ferry", deadline=None)
settings.load_profile("kafka-ferry")
os.environ.setdefault("AIRFLOW_HOME", str(REPO / ".testbed" / "airflow_home"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
# One driver-JVM class-data archive for every spark-submit batch of the run (and later runs), not one per test's
# work dir: the first batch writes it, the others start ~2 s faster (kafka_ferry/core/batches/driver_jvm.py).
os.environ.setdefault("KFERRY_JVM_ARCHIVE_DIR", str(REPO / ".testbed" / "jvm"))


@pytest.fixture(scope="session")
def testbed():
    import kafka_testbed as tb

    started_here = not all(tb._answers(spec.broker_port) for spec in tb.CLUSTERS)
    if started_here:
        tb.up()
    yield tb
    if started_here and not os.environ.get("KFERRY_KEEP_TESTBED"):
        for spec in tb.CLUSTERS:
            tb.stop(spec)


class Clusters:
    """Hands out clients and unique names on the test bed's source and destination clusters."""

    SOURCE_CONN = "kf_test_source"
    DESTINATION_CONN = "kf_test_destination"
    SPARK_CONN = "kf_test_spark"

    def __init__(self, tb):
        self.tb = tb
        self.source_bootstrap = tb.SOURCE.bootstrap
        self.destination_bootstrap = tb.DESTINATION.bootstrap
        self._admins: dict = {}
        for conn_id, bootstrap in ((self.SOURCE_CONN, self.source_bootstrap),
                                   (self.DESTINATION_CONN, self.destination_bootstrap)):
            os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
                {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}})
        os.environ[f"AIRFLOW_CONN_{self.SPARK_CONN.upper()}"] = json.dumps({"conn_type": "spark", "host": "local[2]"})

    @staticmethod
    def unique(prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    def admin(self, side: str):
        """One AdminClient per side, kept alive: a collected client cancels its pending futures."""
        from confluent_kafka.admin import AdminClient

        if side not in self._admins:
            self._admins[side] = AdminClient({"bootstrap.servers": self._bootstrap(side)})
        return self._admins[side]

    def producer(self, side: str = "source", **config):
        from confluent_kafka import Producer

        return Producer({"bootstrap.servers": self._bootstrap(side), "linger.ms": 5, **config})

    def consumer(self, side: str, group_id: str | None = None, **config):
        from confluent_kafka import Consumer

        return Consumer({"bootstrap.servers": self._bootstrap(side), "group.id": group_id or self.unique("reader"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **config})

    def cluster(self, side: str):
        """kafka-ferry's client of one side, through its Airflow connection (as the tasks get it)."""
        from kafka_ferry.hooks.kafka_cluster import kafka_cluster

        return kafka_cluster(self.SOURCE_CONN if side == "source" else self.DESTINATION_CONN)

    def create_topic(self, side: str, name: str, partitions: int = 1, config: dict | None = None) -> str:
        from confluent_kafka.admin import NewTopic

        futures = self.admin(side).create_topics([NewTopic(name, partitions, 1, config=config or {})])
        futures[name].result(30)
        # Why: CreateTopics returns once the controller committed the topic; a broker's metadata may show it a
        # moment later, and a test that lists topics at once (provisioning plans do) would not see it yet.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            topic = self.admin(side).list_topics(name, timeout=10).topics.get(name)
            if topic is not None and topic.error is None and len(topic.partitions) == partitions:
                return name
            time.sleep(0.1)
        raise TimeoutError(f"topic {name} not in the {side} cluster's metadata 30 s after it was created")

    def _bootstrap(self, side: str) -> str:
        if side not in ("source", "destination"):
            raise ValueError(f"side must be 'source' or 'destination', not {side!r}")
        return self.source_bootstrap if side == "source" else self.destination_bootstrap


@pytest.fixture(scope="session")
def clusters(testbed) -> Clusters:
    return Clusters(testbed)


@pytest.fixture(scope="session")
def private(testbed):
    """A second source/destination pair (SASL_SSL, ACLs, brokers tests may kill); see private_clusters.py."""
    from private_clusters import private_clusters

    pair = private_clusters(Clusters)
    pair.up()
    yield pair
    if not os.environ.get("KFERRY_KEEP_TESTBED"):
        pair.down()


@pytest.fixture(scope="session")
def kip848(testbed):
    """A private 4.x -> 4.x pair (KIP-848 consumer groups on both sides; private_clusters.kip848_clusters). Stopped
    by pid at the session's end even with KFERRY_KEEP_TESTBED: only its own tests use it."""
    from private_clusters import kip848_clusters

    pair = kip848_clusters(Clusters)
    pair.up()
    try:
        yield pair
    finally:
        pair.down()


@pytest.fixture(scope="session")
def object_store():
    """The test bed's S3-compatible server (testbed/object_store.py: SeaweedFS built from its Go module), started
    once for the session unless it answers already; the one started here is stopped at its end (by pid), even
    when a test failed."""
    import object_store as ostb

    started_here = not ostb.answers()
    if started_here:
        ostb.up()
    try:
        yield ostb
    finally:
        if started_here:
            ostb.down()


WORK_DIR_CONN = "kf_test_work_dir_s3"


@pytest.fixture
def s3_work_dir(object_store, monkeypatch):
    """A work dir under a prefix of its own in the object store's test bucket, through an ``aws`` connection (the
    Amazon provider's fields): ``(env, fs, root)`` - the environment a worker or the API server gets, an s3fs client
    with the test bed's credentials for the assertions, and ``<bucket>/<prefix>`` (the work base is
    ``s3://<root>/work``). Also set in this process's environment; the prefix is removed after the test."""
    import json
    import uuid

    import s3fs

    # one bucket, a prefix per test: a bucket is a SeaweedFS collection, and each new one takes volumes of its own
    root = f"{object_store.BUCKET}/{uuid.uuid4().hex[:12]}"
    fs = s3fs.S3FileSystem(key=object_store.ACCESS_KEY, secret=object_store.SECRET_KEY,
                           endpoint_url=object_store.ENDPOINT, skip_instance_cache=True,
                           use_listings_cache=False)
    if not fs.exists(object_store.BUCKET):
        fs.mkdir(object_store.BUCKET)
    env = {"KFERRY_WORK_DIR": f"s3://{root}/work", "KFERRY_WORK_DIR_CONN_ID": WORK_DIR_CONN,
           f"AIRFLOW_CONN_{WORK_DIR_CONN.upper()}": json.dumps(
               {"conn_type": "aws", "login": object_store.ACCESS_KEY, "password": object_store.SECRET_KEY,
                "extra": {"endpoint_url": object_store.ENDPOINT, "region_name": "us-east-1"}})}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    yield env, fs, root
    if fs.exists(root):
        fs.rm(root, recursive=True)
