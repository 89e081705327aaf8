"""Cutover window: producers stopped -> promoted, for 100 partitions and 20 groups (target <= 30 s).

    .venv/bin/python bench/cutover_window.py [--partitions 100] [--groups 20] [--quiesce-window 5]
                                             [--engine in-process|spark-connect]

Catch-up first (not timed): seed, copy, translate. Then a last burst of production, the source groups
commit and stop, and the clock starts: quiesce gate (its window is a spec setting and dominates),
groups-inactive gate, then the promotion steps (final copy -> translation -> commit -> reconcile -> mark).
The final copy runs where a migration's would: in the promotion task (a spark-submit engine), or on
the running Spark Connect server of the catch-up batches (`--engine spark-connect`, started before the
clock as a platform keeps it running).
Prints each phase and the total as JSON. Needs the test bed (`python testbed/kafka_testbed.py up`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from _common import tb  # noqa: F401  (puts testbed on sys.path)
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

SOURCE_CONN, DESTINATION_CONN = "kf_bench_source", "kf_bench_destination"


def setup_connections() -> None:
    for conn_id, bootstrap in ((SOURCE_CONN, tb.SOURCE.bootstrap), (DESTINATION_CONN, tb.DESTINATION.bootstrap)):
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}})


def produce(topics: list[str], partitions: int, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": tb.SOURCE.bootstrap, "linger.ms": 10})
    for topic in topics:
        for p in range(partitions):
            for i in range(per_partition):
                producer.produce(topic, key=f"k{i}".encode(), value=b"v" * 100, partition=p)
            producer.poll(0)
    assert producer.flush(60) == 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--records", type=int, default=200, help="records per partition before the cutover")
    parser.add_argument("--burst", type=int, default=20, help="records per partition produced just before it")
    parser.add_argument("--quiesce-window", type=float, default=5.0)
    parser.add_argument("--poke-interval", type=float, default=1.0)
    parser.add_argument("--engine", choices=("in-process", "spark-connect"), default="in-process")
    args = parser.parse_args()
    setup_connections()
    final_copy, stop_server = None, None
    if args.engine == "spark-connect":
        final_copy, stop_server = connect_final_copy()
    try:
        run(args, final_copy)
    finally:
        if stop_server:
            stop_server()


def connect_final_copy():
    """The test bed's Connect server (started unless running) and the promotion's final copy on it."""
    import spark_connect
    from kafka_ferry.copy.packaging import build_package_zip
    from kafka_ferry.promotion.steps import spark_connect_final_copy

    started_here = not spark_connect.answers()
    spark_connect.up()
    package = build_package_zip(Path(tempfile.mkdtemp(prefix="cutover-pkg-")))
    return (spark_connect_final_copy(spark_connect.URL, package),
            spark_connect.down if started_here else None)


def run(args, final_copy) -> None:

    from kafka_ferry.core.specs.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.operators.provision import ProvisionMirrorGroupsOperator, ProvisionMirrorTopicsOperator
    from kafka_ferry.promotion import readiness
    from kafka_ferry.promotion.steps import PromotionRunner, in_process_final_copy
    from kafka_ferry.state.store import MigrationStateStore

    name = f"cut-{uuid.uuid4().hex[:6]}"
    per_topic = args.partitions // args.topics
    topics = [f"{name}.t{i}" for i in range(args.topics)]
    admin = AdminClient({"bootstrap.servers": tb.SOURCE.bootstrap})
    for f in admin.create_topics([NewTopic(t, per_topic, 1) for t in topics]).values():
        f.result(60)
    work = Path(tempfile.mkdtemp(prefix="cutover-"))
    spec_path = work / f"{name}.yaml"
    spec_path.write_text(yaml.safe_dump({
        "name": name, "tenant": "bench",
        "source": {"connection_id": SOURCE_CONN, "alias": "src"},
        "destination": {"connection_id": DESTINATION_CONN, "alias": "dst"},
        "topics": {"include": [f"{name}\\..*"]}, "groups": {"include": [f"{name}-.*"]},
        "promotion": {"quiesce_window_seconds": max(1, int(args.quiesce_window))}}))
    spec = load_spec(spec_path)
    source, destination = kafka_cluster(SOURCE_CONN), kafka_cluster(DESTINATION_CONN)
    store = MigrationStateStore(destination, spec.state_topic_name)

    t = time.monotonic()
    produce(topics, per_topic, args.records)
    rng = random.Random(1)
    groups = [f"{name}-g{i}" for i in range(args.groups)]
    for g in groups:  # each group reads 2 topics, committed somewhere in the data
        consumer = Consumer({"bootstrap.servers": tb.SOURCE.bootstrap, "group.id": g})
        consumer.commit(offsets=[TopicPartition(tp, p, rng.randint(0, args.records))
                                 for tp in rng.sample(topics, 2) for p in range(per_topic)], asynchronous=False)
        consumer.close()
    ProvisionMirrorTopicsOperator(task_id="t", spec_path=str(spec_path)).execute({})
    ProvisionMirrorGroupsOperator(task_id="g", spec_path=str(spec_path)).execute({})
    (final_copy or in_process_final_copy)(spec, source, destination, store)  # catch-up on the same engine
    catch_up_s = time.monotonic() - t

    produce(topics, per_topic, args.burst)  # the last writes before the window
    for g in groups:  # consumers commit their final positions and stop
        consumer = Consumer({"bootstrap.servers": tb.SOURCE.bootstrap, "group.id": g})
        consumer.commit(offsets=[TopicPartition(tp, p, args.records + rng.randint(0, args.burst))
                                 for tp in rng.sample(topics, 2) for p in range(per_topic)], asynchronous=False)
        consumer.close()
    stopped = time.monotonic()
    phases = {}
    while not readiness.check_quiesced_persistent(source, store, topics, args.quiesce_window)[0]:
        time.sleep(args.poke_interval)
    phases["quiesce_gate_s"] = time.monotonic() - stopped
    t = time.monotonic()
    while not readiness.check_groups_inactive(source, groups)[0]:
        time.sleep(args.poke_interval)
    phases["groups_inactive_gate_s"] = time.monotonic() - t
    t = time.monotonic()
    report = PromotionRunner(spec, source, destination, store, work_dir=work, final_copy=final_copy).run()
    phases["promotion_s"] = time.monotonic() - t
    total = time.monotonic() - stopped
    print(json.dumps({
        "engine": args.engine, "partitions": per_topic * args.topics, "groups": args.groups,
        "group_partitions": len(report["groups"]),
        "catch_up_s": round(catch_up_s, 2), "quiesce_window_s": args.quiesce_window,
        **{k: round(v, 2) for k, v in phases.items()},
        "steps_s": {k: v.get("duration_s") for k, v in report["this_run"].items()},
        "cutover_total_s": round(total, 2), "cutover_minus_quiesce_window_s": round(total - args.quiesce_window, 2),
        "status": report["status"], "reconciled_partitions": report["reconciliation"]["partitions_checked"],
        "report": report["report_path"]}, indent=1))


if __name__ == "__main__":
    main()
