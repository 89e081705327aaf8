"""Provenance headers: the loop guard, re-stamping records from a previous hop, and at-least-once without them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scenarios import BASE_TS, copy_in_process, plan_and_copy_in_process, provision, read_partition, write_spec

from kafka_ferry.core.offsets.provenance import SOURCE_CLUSTER_HEADER, SOURCE_OFFSET_HEADER, read_provenance
from kafka_ferry.operators.copy import PlanCopyBatchOperator

pytestmark = pytest.mark.integration


def test_records_that_came_from_the_destination_are_never_copied_back(clusters, tmp_path, work_dir, configs_env):
    p = clusters.unique("loop")
    topic = clusters.create_topic("source", f"{p}.t", 1)
    destination_id = clusters.cluster("destination").describe_cluster().cluster_id
    source_id = clusters.cluster("source").describe_cluster().cluster_id
    producer = clusters.producer("source")
    for i in range(30):
        headers = [("app", b"x")]
        if 10 <= i < 15:  # mirrored from the destination earlier (a reverse flow): copying would loop
            headers += [(SOURCE_CLUSTER_HEADER, destination_id.encode()), (SOURCE_OFFSET_HEADER, str(i).encode())]
        elif i >= 25:  # came through another hop: copied, re-stamped with this source
            headers += [(SOURCE_CLUSTER_HEADER, b"third-cluster"), (SOURCE_OFFSET_HEADER, b"7")]
        producer.produce(topic, key=str(i).encode(), value=b"v", partition=0, headers=headers, timestamp=BASE_TS + i)
    assert producer.flush(30) == 0
    spec_path = write_spec(tmp_path, clusters, p)
    provision(spec_path)

    report = plan_and_copy_in_process(spec_path, configs_env)

    copied = read_partition(clusters, "destination", topic, 0)
    assert report["records_skipped_loop"] == 5 and report["records_copied"] == 25
    assert [read_provenance(r.headers) for r in copied] == [
        (source_id, i) for i in [*range(10), *range(15, 30)]]
    assert [r.key for r in copied] == [str(i).encode() for i in [*range(10), *range(15, 30)]]
    assert all(r.headers[0] == ("app", b"x") and len(r.headers) == 3 for r in copied)
    assert report["lag_after_total"] == 0


def test_without_provenance_headers_a_crash_re_copies_at_least_once(clusters, tmp_path, work_dir, configs_env):
    """Documented behaviour: with provenance headers off the tail cannot be recognised after a crash."""
    p = clusters.unique("noprov")
    topic = clusters.create_topic("source", f"{p}.t", 1)
    producer = clusters.producer("source")
    for i in range(100):
        producer.produce(topic, key=str(i).encode(), value=b"v", partition=0, timestamp=BASE_TS + i)
    assert producer.flush(30) == 0
    spec_path = write_spec(tmp_path, clusters, p, copy={"provenance_headers": False})
    provision(spec_path)
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})

    crashed = copy_in_process(plan["plan_path"], configs_env, fault=f"after_produce:{topic}:0")
    assert crashed.returncode != 0 and "fault injection" in crashed.stderr
    report = plan_and_copy_in_process(spec_path, configs_env)

    copied = read_partition(clusters, "destination", topic, 0)
    assert [r.key for r in copied] == [str(i).encode() for i in range(100)] * 2
    assert all(r.headers == () for r in copied)  # the copy added nothing to the records
    assert report["records_copied"] == 100 and report["records_resumed"] == 0
    assert json.loads(Path(plan["plan_path"]).read_text())["provenance_headers"] is False
