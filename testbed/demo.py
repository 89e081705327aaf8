"""`make demo`: run the demo tenant's migration DAG on the embedded default.

Embedded default = the local two-cluster test bed, Airflow 3 on SQLite (`dag.test()`, no scheduler needed)
and Spark local[*], plus the tenant's two schema registries (`demo_schemas`: started here, stopped on exit).
Seeds the demo tenant's Avro topics and consumer groups on the source (once), runs the DAG and prints what
it did. Credentials reach the tasks only as Airflow Connections (env vars here).
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

AIRFLOW_HOME = Path(os.environ.get("KFERRY_DEMO_AIRFLOW_HOME", REPO / ".testbed" / "airflow_home"))
# `demo.py --secure` (make demo-secure): the same run over the SASL_SSL listeners as least-privilege principals.
SECURE = "--secure" in sys.argv[1:]
ARGS = [a for a in sys.argv[1:] if a != "--secure"]
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


def main() -> int:
    with demo_schemas.registries():
        return run_demo(demo_schemas.register())


def run_demo(schema_ids: dict[str, int]) -> int:
    print("schemas on the source registry: " + ", ".join(f"{s} id {i}" for s, i in schema_ids.items()))
    seed_source(schema_ids)
    if SECURE:
        import demo_secure

        granted = demo_secure.grant_least_privilege(REPO / "dags" / "migrations" / "demo-tenant.yaml",
                                                    list(DEMO_TOPICS), list(DEMO_GROUPS))
        print(f"connections over SASL_SSL, least privilege: {demo_secure.describe(granted)}")
    AIRFLOW_HOME.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, env={**os.environ},
                   stdout=subprocess.DEVNULL)
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    if bag.import_errors:
        print("DAG import errors:", json.dumps(bag.import_errors, indent=2))
        return 1
    dag = bag.dags["kafka_ferry__demo-tenant"]
    print("running the demo tenant's DAG (pre-flight, provisioning, then catch-up copy on Spark + translation, "
          "or the sensor-gated promotion) ...")
    mode = ARGS[0] if ARGS else "catch-up"
    # A promotion is confirmed by typing the migration's name, as a person does in the trigger form.
    conf = {"mode": mode, **({"confirm_migration": "demo-tenant"} if mode == "promote" else {})}
    run = dag.test(run_conf=conf)
    print_summary(run)
    if mode == "promote":
        reset_demo_promotion()
    return 0 if str(run.state) in ("success", "DagRunState.SUCCESS") else 1


def reset_demo_promotion() -> None:
    """Demo only: lift the promotion so `make demo` can run catch-up batches again (production never does)."""
    from kafka_ferry.core.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.promotion.guard import reset_promotion
    from kafka_ferry.state.store import MigrationStateStore

    spec = load_spec(REPO / "dags" / "migrations" / "demo-tenant.yaml")
    reset_promotion(MigrationStateStore(kafka_cluster(spec.destination.connection_id), spec.state_topic_name))
    print("  (demo: promotion reset so that `make demo` can run again; a real migration stays promoted)")


def task_results(run) -> dict[str, object]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, key="return_value")).all()
        return {row.task_id: XComModel.deserialize_value(row) for row in rows}


def print_summary(run) -> None:
    from kafka_ferry.copy.report import report_lines

    results = task_results(run)
    states = {ti.task_id: str(ti.state).rsplit(".", 1)[-1].lower() for ti in run.get_task_instances()}
    print(f"\nDAG run {run.run_id}: {str(run.state).rsplit('.', 1)[-1].lower()}")
    print("  tasks: " + ", ".join(f"{t}={s}" for t, s in sorted(states.items())))
    diff = results.get("preflight") or {}
    for line in (diff.get("topics") or {}).get("changes", []):
        print(f"  pre-flight: {line}")
    for group, topics in ((diff.get("groups") or {}).get("migrated") or {}).items():
        print(f"  pre-flight: migrate group {group} ({', '.join(topics)})")
    schemas = results.get("migrate_schemas") or {}
    if schemas:
        print(f"  schemas ({schemas['mode']}): {len(schemas['subjects'])} subject(s), {schemas['registered']} "
              f"version(s) registered; ids " + ", ".join(f"{s} -> {d}" for s, d in schemas["id_map"].items()))
    plan = results.get("plan_copy") or {}
    report_path = Path(plan["report_path"]) if plan.get("report_path") else None
    if report_path and report_path.exists():
        for line in report_lines(json.loads(report_path.read_text())):
            print(f"  copy: {line}")
    check = results.get("decode_check") or {}
    if "topics" in check and not check["topics"]:
        print("  decode check: no newly copied records to decode")
    for topic, tally in (check.get("topics") or {}).items():
        print(f"  decode check: {topic}: {tally['records']} records, {tally['values_decoded']} values decoded "
              f"against the destination registry, {tally['failed']} failed")
    if check.get("failed"):
        print(f"  decode check: FAILED: {check['failures'][:3]}")
    translation = results.get("translate_offsets") or {}
    for key, value in translation.items():
        if key not in ("decisions", "commits"):
            print(f"  translation: {key} = {value}")
    if "promote_reconcile_mark" in results:
        print_promotion(work_dir("demo-tenant") / "promotion-report.json")


def work_dir(migration: str) -> Path:
    from kafka_ferry.copy.plan import work_dir as ferry_work_dir

    return ferry_work_dir(migration)


def print_promotion(path: Path) -> None:
    report = json.loads(path.read_text())
    steps = ", ".join(f"{name} {step.get('duration_s', '?')} s" for name, step in report["steps"].items())
    print(f"  promotion: {report['status']} ({steps})")
    rec = report["reconciliation"]
    print(f"  reconciliation: {'ok' if rec['ok'] else 'MISMATCH'}: {rec['partitions_checked']} partitions, "
          f"{rec['records_checked']} records, counts and digests equal; mismatched: {rec['mismatched']}")
    for g in report["groups"][:6]:
        print(f"  group {g['group']} {g['source_topic']}-{g['partition']}: source offset {g['upstream_offset']} -> "
              f"destination offset {g['downstream_offset']} ({g['method']}), lag {g['downstream_lag']}")
    print(f"  ... {len(report['groups'])} group partitions in {path}")


if __name__ == "__main__":
    sys.exit(main())
