"""Copy batches end to end on the real clusters, through the DAG's operators and spark-submit local[2]."""

from __future__ import annotations

import pytest
from scenarios import (
    check_all,
    provision,
    read_partition,
    read_syncs,
    run_batch,
    seed_acceptance_topics,
    seed_plain,
    seed_transactional,
    write_spec,
)

pytestmark = [pytest.mark.integration]


@pytest.mark.spark
def test_batches_copy_every_committed_record_exactly_once_and_then_only_new_ones(
        clusters, tmp_path, work_dir, spark_on_path):
    p = clusters.unique("cp")
    topics = seed_acceptance_topics(clusters, p)
    (plain, _), (compacted, _), (txn, _) = topics
    spec_path = write_spec(tmp_path, clusters, p)
    provision(spec_path)
    source_id = clusters.cluster("source").describe_cluster().cluster_id
    alias = f"dst-{p}"

    # The seeds really hold what the acceptance names: offset holes, aborted records, trailing markers.
    compacted_offsets = [r.offset for r in read_partition(clusters, "source", compacted, 0)]
    assert compacted_offsets[-1] + 1 - compacted_offsets[0] > len(compacted_offsets)
    txn_records = read_partition(clusters, "source", txn, 0)
    assert all(r.value is not None and r.value.startswith(b"commit") for r in txn_records)
    assert txn_records[-1].offset + 1 < clusters.cluster("source").list_offsets([(txn, 0)], "latest")[(txn, 0)]

    first = run_batch(spec_path, clusters.SPARK_CONN)

    copied = check_all(clusters, alias, topics, source_id)
    assert first["records_copied"] == copied > 0
    assert first["lag_after_total"] == 0 < first["lag_before_total"]
    assert first["records_resumed"] == first["records_skipped_loop"] == 0
    assert first["syncs_written"] == sum(len(s) for t, _ in topics for s in read_syncs(clusters, alias, t).values())

    second = run_batch(spec_path, clusters.SPARK_CONN)
    assert second["partitions_planned"] == 0 and second["records_copied"] == 0
    assert check_all(clusters, alias, topics, source_id) == copied

    seed_plain(clusters, plain, 3, 40, start=200)
    seed_transactional(clusters, txn, 2, rounds=4, transactional_id=f"{txn}-second")
    third = run_batch(spec_path, clusters.SPARK_CONN)

    total = check_all(clusters, alias, topics, source_id)
    assert third["records_copied"] == total - copied == 3 * 40 + 2 * 5 * 2
    assert {row["source_topic"] for row in third["partitions"]} == {plain, txn}
    assert third["lag_after_total"] == 0
