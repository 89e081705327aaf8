"""`make demo-secure`: the whole demo migration (testbed/demo.py) over the SASL_SSL listeners, as principals that
hold exactly the minimum ACLs; and `make demo`'s output as a new user reads it (no warning, then what still runs,
how to stop it, what to try next). Run here on the private cluster pair, from a clean slate, so the copy is whole."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from scenarios import assert_copied_exactly_once

from kafka_ferry.core.acls.acl_plan import minimum_acls
from kafka_ferry.core.offsets.mm2_wire import checkpoints_topic, offset_syncs_topic
from kafka_ferry.core.schemas.schema_wire import SchemaIdRewriter
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.kafka.acls import describe_acls
from kafka_ferry.state.schema_ids import stored_id_map
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "dags" / "migrations" / "demo-tenant.yaml"


def _wipe_demo(private, spec) -> None:
    """The demo's topics, groups and migration state gone from both clusters (a previous session's run)."""
    import demo_data as demo

    for side in ("source", "destination"):
        admin = private.admin(side)
        mine = [t for t in admin.list_topics(timeout=30).topics if t in demo.DEMO_TOPICS or t in (
            spec.state_topic_name, offset_syncs_topic(spec.destination.alias), checkpoints_topic(spec.source.alias))]
        for future in (admin.delete_topics(mine, operation_timeout=30).values() if mine else []):
            future.result(60)
        groups = [g for g in demo.DEMO_GROUPS if g in {x.group_id for x in admin.list_consumer_groups().result(
            30).valid}]
        for future in (admin.delete_consumer_groups(groups, request_timeout=30).values() if groups else []):
            try:
                future.result(60)
            except KafkaException as exc:  # an empty group the broker removed itself once its topics went
                if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                    raise
        deadline = time.monotonic() + 60
        while set(mine) & set(admin.list_topics(timeout=30).topics):
            assert time.monotonic() < deadline, f"{side}: demo topics not deleted in 60 s"
            time.sleep(0.5)


def test_the_demo_migration_over_sasl_ssl_with_exactly_the_minimum_acls(private, tmp_path):
    import demo_data as demo
    import demo_secure

    spec = load_spec(SPEC)
    _wipe_demo(private, spec)
    source, destination = private.specs["source"], private.specs["destination"]
    env = {**os.environ, "KFERRY_TESTBED_RUN_DIR": str(source.run_dir), "KFERRY_SOURCE_PORT": str(source.broker_port),
           "KFERRY_DESTINATION_PORT": str(destination.broker_port), "KFERRY_DEMO_AIRFLOW_HOME": str(tmp_path / "af"),
           "KFERRY_WORK_DIR": str(tmp_path / "work"), "KFERRY_DEMO_LOG_LEVEL": "INFO"}
    env = {k: v for k, v in env.items() if not k.startswith("AIRFLOW_CONN_") and k != "AIRFLOW__CORE__UNIT_TEST_MODE"}
    done = subprocess.run([sys.executable, str(REPO / "testbed" / "demo.py"), "--secure"], env=env,
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]

    # The connections were the SASL listeners, as the two demo principals, for the whole run.
    assert (f"source: SASL_SSL {source.sasl_bootstrap} as User:demo-ferry-source" in done.stdout
            and f"destination: SASL_SSL {destination.sasl_bootstrap} as User:demo-ferry-destination" in done.stdout)
    summary = next(line for line in done.stdout.splitlines() if line.startswith("  tasks: "))
    assert "failed" not in summary and "copy_batch=success" in summary and "translate_offsets=success" in summary
    # Exactly the minimum ACLs, nothing else, on each side.
    wanted = minimum_acls(spec, "User:demo-ferry-source", "User:demo-ferry-destination", list(demo.DEMO_TOPICS),
                          list(demo.DEMO_GROUPS))
    for side in ("source", "destination"):
        principal = f"User:{demo_secure.PRINCIPALS[side]}"
        assert set(describe_acls(private.cluster(side), principal=principal)) == set(getattr(wanted, side)), side
    assert "sasl.password" not in output
    # The schemas moved (remap: the destination registry assigns its own ids) and every copied record decoded there.
    assert "migrate_schemas=success" in summary and "decode_check=success" in summary
    for topic, (partitions, _) in demo.DEMO_TOPICS.items():
        n = partitions * demo.RECORDS_PER_PARTITION
        assert f"decode check: {topic}: {n} records, {n} values decoded against the destination registry, 0 failed" \
            in done.stdout, done.stdout[-3000:]
    store = MigrationStateStore(private.cluster("destination"), spec.state_topic_name)
    id_map = stored_id_map(store)
    assert id_map and all(src != dst for src, dst in id_map.items()), id_map
    # The whole demo copied, record by record, each value with its schema id rewritten and nothing else changed.
    source_id = private.cluster("source").describe_cluster().cluster_id
    copied = 0
    for topic, (partitions, _) in demo.DEMO_TOPICS.items():
        pairs = assert_copied_exactly_once(private, topic, topic, partitions, source_id, SchemaIdRewriter(id_map))
        copied += sum(len(p) for p in pairs.values())
    assert copied == sum(n for n, _ in demo.DEMO_TOPICS.values()) * demo.RECORDS_PER_PARTITION
    print(f"demo over SASL_SSL: {copied} records copied exactly once; {summary.strip()}")


# A line at warning level or above, in any of the forms that reach the demo's terminal: Airflow's structlog
# ("[warning  ]"), the standard library's ("WARNING", "ERROR:"), librdkafka's own ("%4|...|FAC|"), Python's
# warnings ("...Warning:") and a traceback.
LOUD = re.compile(r"\[(warning|error|critical|exception)\s*\]|\b(WARNING|ERROR|CRITICAL)\b|%[0-4]\|\d|"
                  r"\w+Warning: |^Traceback ", re.MULTILINE)


def test_the_demo_prints_no_warning_and_ends_with_what_runs_how_to_stop_it_and_what_next(private, tmp_path):
    spec = load_spec(SPEC)
    _wipe_demo(private, spec)
    source, destination = private.specs["source"], private.specs["destination"]
    env = {**os.environ, "KFERRY_TESTBED_RUN_DIR": str(source.run_dir), "KFERRY_SOURCE_PORT": str(source.broker_port),
           "KFERRY_DESTINATION_PORT": str(destination.broker_port), "KFERRY_DEMO_AIRFLOW_HOME": str(tmp_path / "af")}
    env = {k: v for k, v in env.items() if not (k.startswith(("AIRFLOW_CONN_", "AIRFLOW__")) or k in (
        "KFERRY_DEMO_LOG_LEVEL", "KFERRY_LOG_LEVEL"))}
    done = subprocess.run([sys.executable, str(REPO / "testbed" / "demo.py")], env=env, capture_output=True,
                          text=True, timeout=900, cwd=REPO)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    summary = next(line for line in done.stdout.splitlines() if line.startswith("  tasks: "))
    assert "failed" not in summary and "copy_batch=success" in summary, summary
    loud = [line for line in output.splitlines() if LOUD.search(line)]
    assert not loud, "\n".join(loud)

    last = [line for line in done.stdout.splitlines() if line.strip()][-3:]
    assert last[0].startswith(f"still running: the test bed's Kafka clusters, source {source.bootstrap} and "
                              f"destination {destination.bootstrap}"), last
    assert last[1] == "stop it:       make testbed-down", last
    assert last[2].startswith("next:          make demo-promote"), last
    # The run's page as a person types it in the demo's directory (relative when below it): a file that is there
    page = next(line for line in done.stdout.splitlines() if line.startswith("  translation: run_report = "))
    assert (REPO / shlex.split(page.split(" = ", 1)[1])[0]).is_file(), page
