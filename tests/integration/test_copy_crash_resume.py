"""Kill the copy job for real (os._exit in the Spark task) at each fault point, rerun: zero loss, zero duplicates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scenarios import (
    assert_copied_exactly_once,
    assert_syncs_exact,
    provision,
    read_partition,
    read_syncs,
    run_batch,
    seed_plain,
    spark_submit,
    write_spec,
)

from kafka_ferry.copy.faults import EXIT_CODE
from kafka_ferry.kafka.configs import encode_cluster_configs
from kafka_ferry.operators.copy import PlanCopyBatchOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PER_PARTITION = 300


@pytest.mark.parametrize(("fault", "master", "resumed_on_p0"), [
    ("before_produce:{topic}:0:120", "local[2]", None),
    ("after_produce:{topic}:0:150", "local[2]", None),
    ("after_produce:{topic}:0", "local[2]", PER_PARTITION),
    ("after_partition:{topic}:0", "local[1]", 0),
], ids=["before-produce", "mid-ack", "after-produce-before-progress", "between-partitions"])
def test_a_killed_batch_reruns_to_exactly_once(clusters, tmp_path, work_dir, spark_on_path, cluster_configs,
                                               fault, master, resumed_on_p0):
    p = clusters.unique("kill")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, PER_PARTITION)
    # between partitions: one task, one lane, copies 0 then 1 (other lanes would copy 1 meanwhile)
    one_lane = {"lanes_per_task": 1} if fault.startswith("after_partition") else {}
    spec_path = write_spec(tmp_path, clusters, p, copy=one_lane)
    provision(spec_path)
    source_id = clusters.cluster("source").describe_cluster().cluster_id
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})
    configs_env = encode_cluster_configs(cluster_configs["source"], cluster_configs["destination"])

    crashed = spark_submit(plan["plan_path"], configs_env, master=master, fault=fault.format(topic=topic))

    assert crashed.returncode != 0, crashed.stdout[-2000:]
    assert "kafka-ferry fault injection" in crashed.stdout + crashed.stderr
    assert f"exit code: {EXIT_CODE}" in crashed.stdout + crashed.stderr or "exited unexpectedly" in (
        crashed.stdout + crashed.stderr)
    on_destination = len(read_partition(clusters, "destination", topic, 0))
    if fault.startswith("before_produce"):
        assert on_destination <= 120
    elif resumed_on_p0 is not None:
        assert on_destination == PER_PARTITION  # the crash lost the progress, not the records
    if fault.startswith("after_partition"):  # one task copies 0 then 1: the crash came between them
        assert read_partition(clusters, "destination", topic, 1) == []

    # The Airflow retry of copy_batch re-runs the same plan file, then the next run plans afresh.
    retried = spark_submit(plan["plan_path"], configs_env, master=master)
    assert retried.returncode == 0, retried.stdout[-3000:] + retried.stderr[-3000:]
    after = run_batch(spec_path, clusters.SPARK_CONN)

    assert after["partitions_planned"] == 0 and after["records_copied"] == 0
    pairs = assert_copied_exactly_once(clusters, topic, topic, 2, source_id)
    syncs = read_syncs(clusters, f"dst-{p}", topic)
    for partition, partition_pairs in pairs.items():
        assert len(partition_pairs) == PER_PARTITION
        assert_syncs_exact(syncs[partition], partition_pairs, PER_PARTITION)
    if resumed_on_p0 is not None:  # partition 0 was fully copied before the crash: the retry copies none of it
        rows = {r["partition"]: r for r in json.loads(Path(plan["report_path"]).read_text())["partitions"]}
        assert (rows[0]["records_resumed"], rows[0]["records_copied"]) == (resumed_on_p0, 0)
