"""`make demo`: run the demo tenant's migration DAG on the embedded default.

Embedded default = the local two-cluster test bed, Airflow 3 on SQLite (`dag.test()`, no scheduler needed)
and Spark local[*], plus the tenant's two schema registries (`demo_schemas`: started here, stopped on exit).
Seeds the demo tenant's Avro topics and consumer groups on the source (once), runs the DAG and prints what
it did, through the `kafka-ferry` command (kafka_ferry/cli). Credentials reach the tasks only as Airflow
Connections (env vars here).

Modes (`make demo` runs catch-up; `make demo-promote` runs promote): catch-up (or run) provisions and copies one
batch, dry-run plans and changes nothing, promote runs the sensor-gated cutover and then lifts it again so the demo
can run once more. `--secure` runs over the SASL_SSL listeners as two least-privilege principals.

Ports: the test bed's (KFERRY_SOURCE_PORT, KFERRY_DESTINATION_PORT), the demo's registries
(KFERRY_DEMO_SR_SOURCE_PORT / _DESTINATION_PORT, 18181/18182), Airflow's home (KFERRY_DEMO_AIRFLOW_HOME):
docs/testbed.md. The test bed keeps running afterwards (`make testbed-down` stops it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "testbed"))
import kafka_testbed as tb  # noqa: E402

AIRFLOW_HOME = Path(os.environ.get("KFERRY_DEMO_AIRFLOW_HOME", REPO / ".testbed" / "airflow_home"))
ENV = {
    "AIRFLOW_HOME": str(AIRFLOW_HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("KFERRY_DEMO_LOG_LEVEL", "WARNING"),
    "AIRFLOW_CONN_KAFKA_SOURCE": json.dumps(
        {"conn_type": "kafka", "extra": {"bootstrap.servers": tb.SOURCE.bootstrap}}),
    "AIRFLOW_CONN_KAFKA_DESTINATION": json.dumps(
        {"conn_type": "kafka", "extra": {"bootstrap.servers": tb.DESTINATION.bootstrap}}),
    "AIRFLOW_CONN_SPARK_LOCAL": json.dumps({"conn_type": "spark", "host": "local[*]"}),
}
os.environ.update(ENV)

import demo_schemas  # noqa: E402
from demo_data import DEMO_GROUPS, DEMO_TOPICS, RECORDS_PER_PARTITION  # noqa: E402


def seed_source(schema_ids: dict[str, int]) -> None:
    """Create and fill the demo topics (Avro values) and commit the demo groups' offsets, unless already there."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": tb.SOURCE.bootstrap})
    existing = set(admin.list_topics(timeout=30).topics)
    missing = [NewTopic(t, n, 1, config=c) for t, (n, c) in DEMO_TOPICS.items() if t not in existing]
    if not missing:
        demo_schemas.check_seeded_ids(tb.SOURCE.bootstrap, schema_ids)
        print("source already seeded")
        return
    for future in admin.create_topics(missing).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": tb.SOURCE.bootstrap, "linger.ms": 20})
    values = demo_schemas.value_writers()
    for topic, (partitions, _) in DEMO_TOPICS.items():
        for p in range(partitions):
            for i in range(RECORDS_PER_PARTITION):
                key = f"{topic}-{p}-{i % 500}".encode()
                producer.produce(topic, key=key, value=values[topic](p, i), partition=p,
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


SPEC = REPO / "dags" / "migrations" / "demo-tenant.yaml"
# `make demo` [mode]: the demo's modes, as the `kafka-ferry` command names them
COMMANDS = {"catch-up": "run", "run": "run", "dry-run": "dry-run", "promote": "promote"}
# What to try after each mode, as a person types it from the checkout
NEXT = {"run": "make demo-promote   (the sensor-gated cutover of the demo tenant; then `make demo` runs again)",
        "dry-run": "make demo           (provision and copy one batch for real)",
        "promote": "make demo           (catch-up again: the demo lifted the promotion)"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="testbed/demo.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", default="catch-up", choices=list(COMMANDS),
                        help="what the demo's DAG runs (default catch-up)")
    parser.add_argument("--secure", action="store_true",
                        help="over the SASL_SSL listeners, as two principals with exactly the minimum ACLs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    command = COMMANDS[args.mode]
    try:
        with demo_schemas.registries():
            return run_demo(demo_schemas.register(), command, args.secure)
    finally:
        print_what_runs(command)


def shown(path: Path) -> str:
    """A path as a person types it: relative to the checkout when inside it (the demo is run from there)."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def print_what_runs(command: str) -> None:
    """The demo's last lines: what it left running, how to stop that, and what to try next."""
    print()
    print(f"still running: the test bed's Kafka clusters, source {tb.SOURCE.bootstrap} and destination "
          f"{tb.DESTINATION.bootstrap} (the demo's registries stopped with it; Airflow's home, on SQLite: "
          f"{shown(AIRFLOW_HOME)})")
    print("stop it:       make testbed-down")
    print(f"next:          {NEXT[command]}")


def run_demo(schema_ids: dict[str, int], command: str = "run", secure: bool = False) -> int:
    """Seed, then the `kafka-ferry` command over the demo tenant's spec, as a user would run it."""
    from kafka_ferry.cli import main as kafka_ferry

    print("schemas on the source registry: " + ", ".join(f"{s} id {i}" for s, i in schema_ids.items()))
    seed_source(schema_ids)
    if secure:
        import demo_secure

        granted = demo_secure.grant_least_privilege(SPEC, list(DEMO_TOPICS), list(DEMO_GROUPS))
        print(f"connections over SASL_SSL, least privilege: {demo_secure.describe(granted)}")
    AIRFLOW_HOME.mkdir(parents=True, exist_ok=True)
    print("running the demo tenant's DAG (pre-flight, provisioning, then catch-up copy on Spark + translation, "
          "or the sensor-gated promotion) ...")
    print(f"$ kafka-ferry {command} {SPEC.relative_to(REPO)}", flush=True)
    # A promotion is confirmed by typing the migration's name; the demo types it.
    code = kafka_ferry([command, str(SPEC), *(["--yes-i-mean", "demo-tenant"] if command == "promote" else [])])
    if command == "promote":
        # Demo only: lift the promotion so `make demo` can run catch-up batches again (production never does).
        # (the rollback is given up knowingly: without --give-up-rollback the reset refuses while one is possible)
        kafka_ferry(["reset-promotion", str(SPEC), "--yes-i-mean", "demo-tenant", "--give-up-rollback"])
        print("  (demo: promotion reset so that `make demo` can run again; a real migration stays promoted)")
    return code


if __name__ == "__main__":
    sys.exit(main())
