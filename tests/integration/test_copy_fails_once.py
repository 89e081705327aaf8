"""A copy failure no retry can heal fails the copy task once, with its cause as the message, on both engines.

Here: a topic deleted between plan and copy. The copy task raises AirflowFailException (Airflow does not retry it)
naming the partitions; never spark-submit's `Cannot execute: ...`, never a Python traceback inside a JVM error.
"""

from __future__ import annotations

import time

import pytest
from airflow.sdk.exceptions import AirflowFailException
from scenarios import _TaskInstance, provision, seed_plain, write_spec

from kafka_ferry.operators.copy import CopyBatchSparkOperator, PlanCopyBatchOperator

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.mark.parametrize("engine", ["spark-submit", "spark-connect"])
def test_a_topic_deleted_between_plan_and_copy_fails_the_copy_task_once_naming_it(
        clusters, tmp_path, work_dir, engine, request):
    spark_conn = clusters.SPARK_CONN if engine == "spark-submit" else request.getfixturevalue("spark_connect")
    p = clusters.unique("gone")
    kept, doomed = (clusters.create_topic("source", f"{p}.{name}", 2) for name in ("kept", "doomed"))
    for topic in (kept, doomed):
        seed_plain(clusters, topic, 2, 20)
    spec_path = write_spec(tmp_path, clusters, p, copy={"spark_connection_id": spark_conn})
    provision(spec_path)
    ti = _TaskInstance()
    ti.xcom["plan_copy"] = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({"ti": ti})
    clusters.admin("source").delete_topics([doomed])[doomed].result(30)
    deadline = time.monotonic() + 30
    while doomed in clusters.cluster("source").list_topic_names() and time.monotonic() < deadline:
        time.sleep(0.2)

    copy = CopyBatchSparkOperator(task_id="copy_batch", spec_path=spec_path, conn_id=spark_conn)
    with pytest.raises(AirflowFailException) as failure:
        copy.execute({"ti": ti, "run_id": "r1"})

    message = str(failure.value)
    assert f"planned partitions no longer exist: source {doomed}-0, source {doomed}-1" in message, message
    assert "Cannot execute" not in message and "Traceback" not in message, message
    ends = clusters.cluster("destination").list_offsets([(kept, 0), (kept, 1)], read_committed=False)
    assert ends == {(kept, 0): 0, (kept, 1): 0}  # nothing copied
    print(f"\ntopic deleted between plan and copy, {engine}: failed once with: {message[:300]}")


@pytest.mark.parametrize("engine", ["spark-submit", "spark-connect"])
def test_a_record_over_the_destinations_size_limit_fails_the_copy_task_once_naming_it(
        clusters, tmp_path, work_dir, engine, request):
    spark_conn = clusters.SPARK_CONN if engine == "spark-submit" else request.getfixturevalue("spark_connect")
    p = clusters.unique("big")
    topic = clusters.create_topic("source", f"{p}.t", 1)
    big_at = 30  # 300 KB: above the destination topic's 200 KB, below the clients' 1 MB message.max.bytes
    producer = clusters.producer("source")
    for i in range(60):
        producer.produce(topic, value=b"B" * 300_000 if i == big_at else f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    spec_path = write_spec(tmp_path, clusters, p, copy={"spark_connection_id": spark_conn})
    provision(spec_path)
    clusters.cluster("destination").set_topic_configs(topic, {"max.message.bytes": "200000"})
    ti = _TaskInstance()
    ti.xcom["plan_copy"] = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({"ti": ti})

    copy = CopyBatchSparkOperator(task_id="copy_batch", spec_path=spec_path, conn_id=spark_conn)
    with pytest.raises(AirflowFailException) as failure:
        copy.execute({"ti": ti, "run_id": "r1"})

    message = str(failure.value)
    assert f"copy {topic}-0 to {topic}-0 at source offsets" in message and "too large" in message.lower(), message
    assert f"the largest record not copied is {topic}-0 at source offset {big_at} (300000 bytes" in message, message
    assert "Cannot execute" not in message and "Traceback" not in message, message
    print(f"\nrecord over the size limit, {engine}: failed once with: {message[:400]}")
