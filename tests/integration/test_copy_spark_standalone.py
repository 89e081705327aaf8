"""The same batch on a real Spark standalone cluster (master + 2 workers): same records, same syncs."""

from __future__ import annotations

import pytest
from scenarios import check_all, provision, run_batch, seed_acceptance_topics, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_batch_on_a_standalone_cluster_copies_exactly_once_with_the_shipped_package(
        clusters, tmp_path, work_dir, spark_standalone):
    p = clusters.unique("sa")
    topics = seed_acceptance_topics(clusters, p)
    spec_path = write_spec(tmp_path, clusters, p)
    provision(spec_path)
    source_id = clusters.cluster("source").describe_cluster().cluster_id

    report = run_batch(spec_path, spark_standalone)

    copied = check_all(clusters, f"dst-{p}", topics, source_id)
    assert report["records_copied"] == copied > 0 and report["lag_after_total"] == 0
    packages = {row["executor"]["package"] for row in report["partitions"]}
    # executors imported kafka_ferry from the zip spark-submit shipped, not from this checkout
    assert packages and all(".zip" in path and "kafka_ferry-" in path for path in packages), packages
    assert run_batch(spec_path, spark_standalone)["records_copied"] == 0
