"""`make demo`: run the demo tenant's migration DAG on the embedded default.

Embedded default = the local two-cluster test bed, Airflow 3 on SQLite (`dag.test()`, no scheduler needed)
and Spark local[*]. Seeds the demo tenant's topics and consumer groups on the source (once), runs the DAG
and prints what it did. Credentials reach the tasks only as Airflow Connections (env vars here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "testbed"))
import kafka_testbed as tb  # noqa: E402

AIRFLOW_HOME = REPO / ".testbed" / "airflow_home"
ENV = {
    "AIRFLOW_HOME": str(AIRFLOW_HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW_CONN_KAFKA_SOURCE": json.dumps(
        {"conn_type": "kafka", "extra": {"bootstrap.servers": tb.SOURCE.bootstrap}}),
    "AIRFLOW_CONN_KAFKA_DESTINATION": json.dumps(
        {"conn_type": "kafka", "extra": {"bootstrap.servers": tb.DESTINATION.bootstrap}}),
    "AIRFLOW_CONN_SPARK_LOCAL": json.dumps({"conn_type": "spark", "host": "local[*]"}),
}
os.environ.update(ENV)

DEMO_TOPICS = {"demo.orders": (6, {}), "demo.payments": (3, {"cleanup.policy": "compact"})}
DEMO_GROUPS = {"demo-billing": {"demo.orders": 0.6}, "demo-audit": {"demo.orders": 0.3, "demo.payments": 0.5}}
RECORDS_PER_PARTITION = 2000


def seed_source() -> None:
    """Create and fill the demo topics and commit the demo groups' offsets, unless already there."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": tb.SOURCE.bootstrap})
    existing = set(admin.list_topics(timeout=30).topics)
    missing = [NewTopic(t, n, 1, config=c) for t, (n, c) in DEMO_TOPICS.items() if t not in existing]
    if not missing:
        print("source already seeded")
        return
    for future in admin.create_topics(missing).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": tb.SOURCE.bootstrap, "linger.ms": 20})
    for topic, (partitions, _) in DEMO_TOPICS.items():
        for p in range(partitions):
            for i in range(RECORDS_PER_PARTITION):
                key = f"{topic}-{p}-{i % 500}".encode()
                producer.produce(topic, key=key, value=json.dumps({"n": i, "p": p}).encode(), partition=p,
                                 headers=[("origin", b"demo")])
            producer.poll(0)
    producer.flush(60)
    for group, fractions in DEMO_GROUPS.items():
        consumer = Consumer({"bootstrap.servers": tb.SOURCE.bootstrap, "group.id": group})
        offsets = [TopicPartition(t, p, int(RECORDS_PER_PARTITION * f))
                   for t, f in fractions.items() for p in range(DEMO_TOPICS[t][0])]
        consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()
    print(f"seeded {', '.join(DEMO_TOPICS)} and groups {', '.join(DEMO_GROUPS)} on the source")


def main() -> int:
    seed_source()
    AIRFLOW_HOME.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, env={**os.environ},
                   stdout=subprocess.DEVNULL)
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    if bag.import_errors:
        print("DAG import errors:", json.dumps(bag.import_errors, indent=2))
        return 1
    dag = bag.get_dag("kafka_ferry__demo-tenant")
    run = dag.test()
    print(f"\nDAG run {run.run_id}: {run.state}")
    from kafka_ferry.core.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import KafkaClusterHook
    from kafka_ferry.io.state_store import MigrationStateStore

    spec = load_spec(REPO / "dags" / "migrations" / "demo-tenant.yaml")
    state = MigrationStateStore(KafkaClusterHook(spec.destination.connection_id), spec.state_topic_name).read_all()
    print(f"migration state ({spec.state_topic_name}):")
    for kind, records in sorted(state.items()):
        print(f"  {kind}: {len(records)} record(s): {', '.join(sorted(records)[:8])}")
    return 0 if str(run.state) in ("success", "DagRunState.SUCCESS") else 1


if __name__ == "__main__":
    sys.exit(main())
