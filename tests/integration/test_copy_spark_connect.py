"""Copy batches on a running Spark Connect server (the `spark_connect` connection type): same records, same syncs,
the same exactly-once resume after a worker dies mid-batch."""

from __future__ import annotations

import os

import pytest
from scenarios import (
    assert_copied_exactly_once,
    assert_syncs_exact,
    check_all,
    provision,
    read_partition,
    read_syncs,
    run_batch,
    seed_acceptance_topics,
    seed_plain,
    write_spec,
)

from kafka_ferry.copy.faults import FAULT_ENV

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PER_PARTITION = 300


def test_batches_on_spark_connect_copy_exactly_once_with_the_package_shipped_as_an_artifact(
        clusters, tmp_path, work_dir, spark_connect):
    p = clusters.unique("sc")
    topics = seed_acceptance_topics(clusters, p)
    spec_path = write_spec(tmp_path, clusters, p, copy={"spark_connection_id": spark_connect})
    provision(spec_path)
    source_id = clusters.cluster("source").describe_cluster().cluster_id

    first = run_batch(spec_path, spark_connect)

    # the client session leaves no Connect mode behind: a later spark-submit batch from this process must start
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ and "SPARK_REMOTE" not in os.environ

    copied = check_all(clusters, f"dst-{p}", topics, source_id)
    assert first["records_copied"] == copied > 0 and first["lag_after_total"] == 0 < first["lag_before_total"]
    packages = {row["executor"]["package"] for row in first["partitions"]}
    # the server's Python workers imported kafka_ferry from the session artifact, not from this checkout
    assert packages and all(".zip" in path and "kafka_ferry-" in path for path in packages), packages
    assert run_batch(spec_path, spark_connect)["records_copied"] == 0

    # the next batch with records attaches to the kept session: the same Python daemon forks its workers
    seed_plain(clusters, topics[0][0], 1, 10, start=200)
    second = run_batch(spec_path, spark_connect)
    assert second["records_copied"] == 10
    assert _daemons(second) <= _daemons(first), (_daemons(first), _daemons(second))
    assert len(list(work_dir.rglob("*.connect-session"))) == 1


def test_a_worker_killed_mid_batch_on_spark_connect_is_resumed_exactly_once_by_the_retry(
        clusters, tmp_path, work_dir, spark_connect, monkeypatch):
    p = clusters.unique("sck")
    topic, spec_path, source_id = _two_partitions_provisioned(clusters, tmp_path, p, spark_connect)

    monkeypatch.setenv(FAULT_ENV, f"before_produce:{topic}:0:120")
    with pytest.raises(Exception) as crashed:  # noqa: PT011 - the Connect client raises the server's failure
        run_batch(spec_path, spark_connect)
    assert "kafka-ferry fault injection" in str(crashed.value) or "exited unexpectedly" in str(crashed.value) \
        or "crashed" in str(crashed.value).lower(), str(crashed.value)[-2000:]
    assert len(read_partition(clusters, "destination", topic, 0)) <= 120

    monkeypatch.delenv(FAULT_ENV)
    retried = run_batch(spec_path, spark_connect)  # the task's retry plans afresh from the stored progress

    pairs = assert_copied_exactly_once(clusters, topic, topic, 2, source_id)
    syncs = read_syncs(clusters, f"dst-{p}", topic)
    for partition, partition_pairs in pairs.items():
        assert len(partition_pairs) == PER_PARTITION
        assert_syncs_exact(syncs[partition], partition_pairs, PER_PARTITION)
    assert retried["records_copied"] + retried["records_resumed"] > 0
    assert run_batch(spec_path, spark_connect)["records_copied"] == 0


def test_the_promotion_final_copy_runs_on_the_spark_connect_engine_of_the_catch_up_batches(
        clusters, tmp_path, work_dir, spark_connect, monkeypatch):
    import kafka_ferry.copy.connect_engine as connect_engine
    from kafka_ferry.operators.promotion import PromoteMigrationOperator

    p = clusters.unique("scf")
    topic, spec_path, source_id = _two_partitions_provisioned(clusters, tmp_path, p, spark_connect)
    assert run_batch(spec_path, spark_connect)["records_copied"] == 2 * PER_PARTITION
    seed_plain(clusters, topic, 2, PER_PARTITION)  # producers wrote more before they stopped

    sessions = []
    real = connect_engine.run_on_spark_connect

    def spy(url, plan, configs, package_zip, fault_spec=None):
        rows = real(url, plan, configs, package_zip, fault_spec)
        sessions.append(rows)
        return rows

    monkeypatch.setattr(connect_engine, "run_on_spark_connect", spy)
    report = PromoteMigrationOperator(task_id="final_copy", spec_path=spec_path, steps=("final_copy",)).execute({})

    assert report["this_run"]["final_copy"]["status"] == "done", report["this_run"]
    # one Connect session copied the new records, in the server's workers (the package from the artifact)
    assert len(sessions) == 1 and sum(r["records_copied"] for r in sessions[0]) == 2 * PER_PARTITION
    assert all(".zip" in r["executor"]["package"] for r in sessions[0]), sessions[0]
    pairs = assert_copied_exactly_once(clusters, topic, topic, 2, source_id)
    assert all(len(partition_pairs) == 2 * PER_PARTITION for partition_pairs in pairs.values())


def test_a_session_the_server_closed_is_replaced_by_a_new_one_and_the_batch_copies(
        clusters, tmp_path, work_dir, spark_connect):
    from pyspark.sql import SparkSession

    import spark_connect as connect_server
    from kafka_ferry.copy.connect_engine import CONNECT_MODE_ENV, session_url

    p = clusters.unique("scc")
    topic, spec_path, source_id = _two_partitions_provisioned(clusters, tmp_path, p, spark_connect)
    first = run_batch(spec_path, spark_connect)
    (record,) = work_dir.rglob("*.connect-session")
    kept = record.read_text()

    # the server closes the kept session (as its idle timeout does): it refuses that id from now on
    try:
        SparkSession.builder.remote(session_url(connect_server.URL, kept)).create().stop()
    finally:  # pyspark leaves this process marked as a Connect client: later spark-submit runs would refuse
        for name in CONNECT_MODE_ENV:
            os.environ.pop(name, None)

    seed_plain(clusters, topic, 2, PER_PARTITION, start=PER_PARTITION)
    second = run_batch(spec_path, spark_connect)

    assert first["records_copied"] == second["records_copied"] == 2 * PER_PARTITION
    assert record.read_text() != kept  # a new session, kept for the batches after
    assert not _daemons(second) & _daemons(first)
    pairs = assert_copied_exactly_once(clusters, topic, topic, 2, source_id)
    assert all(len(partition_pairs) == 2 * PER_PARTITION for partition_pairs in pairs.values())


def _two_partitions_provisioned(clusters, tmp_path, p: str, spark_connect: str) -> tuple[str, str, str]:
    """A source topic of two partitions with PER_PARTITION records each, its migration provisioned on Connect."""
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, PER_PARTITION)
    spec_path = write_spec(tmp_path, clusters, p, copy={"spark_connection_id": spark_connect})
    provision(spec_path)
    return topic, spec_path, clusters.cluster("source").describe_cluster().cluster_id


def _daemons(report: dict) -> set[int]:
    """The Python daemons whose workers copied the batch's partitions."""
    return {row["executor"]["parent"] for row in report["partitions"] if "executor" in row}
