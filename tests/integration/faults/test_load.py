"""Load: ten migrations (DAGs) of twenty partitions each catch up at once on one Airflow and one Spark.

One Airflow: PostgreSQL + api-server, scheduler, dag-processor, triggerer (LocalExecutor), as `make e2e` runs
it. One Spark: a Spark Connect server (local[2]); every copy task is a client session of it, so ten batches
share its two cores. All ten DAG runs are triggered together through the REST API. Then, per migration,
record by record: every source record on the destination exactly once; its state topic, offset syncs and
checkpoints hold only its own topics and groups (all ten share the source alias, hence one checkpoints
topic), and every checkpoint translates its group's committed offset exactly.
"""

from __future__ import annotations

import os
import time
import urllib.parse

import pytest
import yaml
from confluent_kafka import TopicPartition
from fault_support import count_exact, seed_volume
from scenarios import read_partition

from airflow_stack import AirflowStack
from kafka_ferry.core.common.state_records import BATCH_KIND, PROGRESS_KIND
from kafka_ferry.core.offsets.mm2_wire import Checkpoint, OffsetSync, checkpoints_topic, offset_syncs_topic
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.dag_factory import write_stubs
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.airflow, pytest.mark.spark]

MIGRATIONS = int(os.environ.get("KFERRY_LOAD_MIGRATIONS", 10))
PARTITIONS = int(os.environ.get("KFERRY_LOAD_PARTITIONS", 20))
PER_PARTITION = int(os.environ.get("KFERRY_LOAD_RECORDS_PER_PARTITION", 500))
SOURCE_ALIAS = "src"


def _spec(private, name: str, spark_conn: str) -> dict:
    return {"name": name, "tenant": f"tenant-{name}", "schedule": None,
            "source": {"connection_id": private.SOURCE_CONN, "alias": SOURCE_ALIAS},
            "destination": {"connection_id": private.DESTINATION_CONN, "alias": f"dst-{name}"},
            "topics": {"include": [f"{name}\\..*"]}, "groups": {"include": [f"{name}-.*"]},
            "copy": {"spark_connection_id": spark_conn, "offset_sync_interval": 50}}


def _commit(private, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = private.consumer("source", group_id=group)
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    consumer.close()


def _run_state(stack, token, dag_id: str, run_id: str) -> dict:
    return stack.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}", token)


def test_ten_migrations_of_twenty_partitions_catch_up_at_once_on_one_airflow_and_one_spark(
        private, tmp_path, spark_connect):
    names = [private.unique(f"load{i}") for i in range(MIGRATIONS)]
    dags = tmp_path / "dags"
    (dags / "migrations").mkdir(parents=True)
    committed: dict[str, dict[int, int]] = {}
    seeded_at = time.monotonic()
    for i, name in enumerate(names):
        topic = private.create_topic("source", f"{name}.events", PARTITIONS)
        seed_volume(private, topic, PARTITIONS, PER_PARTITION, value_size=100)
        committed[name] = {p: 1 + (p * 37 + i) % (PER_PARTITION - 1) for p in range(PARTITIONS)}  # inside the log
        _commit(private, f"{name}-app", topic, committed[name])
        (dags / "migrations" / f"{name}.yaml").write_text(yaml.safe_dump(_spec(private, name, spark_connect)))
    write_stubs(dags)
    seed_s = time.monotonic() - seeded_at

    work = tmp_path / "work"
    env = {k: v for k, v in os.environ.items() if k.startswith("AIRFLOW_CONN_")}
    with AirflowStack(tmp_path / "airflow", dags, {**env, "KFERRY_WORK_DIR": str(work)}) as stack:
        token = stack.token()
        dag_ids = [f"kafka_ferry__{name}" for name in names]
        for dag_id in dag_ids:
            stack.wait(lambda d=dag_id: stack.call("GET", f"/api/v2/dags/{d}", token), 300, f"{dag_id} parsed")
            stack.call("PATCH", f"/api/v2/dags/{dag_id}", token, {"is_paused": False})
        started = time.monotonic()
        runs = {dag_id: stack.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", token,
                                   {"logical_date": None, "conf": {"mode": "catch-up"}})["dag_run_id"]
                for dag_id in dag_ids}
        done: dict[str, dict] = {}

        def all_finished() -> bool:
            for dag_id, run_id in runs.items():
                if dag_id not in done:
                    run = _run_state(stack, token, dag_id, run_id)
                    if run["state"] in ("success", "failed"):
                        done[dag_id] = {**run, "finished_after_s": time.monotonic() - started}
            return len(done) == len(runs)

        stack.wait(all_finished, 1500, f"{len(runs)} catch-up runs finished")
        wall_s = time.monotonic() - started
        failed = {d: r["state"] for d, r in done.items() if r["state"] != "success"}
        assert not failed, f"{failed}\n{stack.logs()}"

    destination = private.cluster("destination")
    source_id = private.cluster("source").describe_cluster().cluster_id
    own_topics = {name: f"{name}.events" for name in names}
    checkpoints = _read_checkpoints(private)
    checked = lost = duplicated = 0
    for name in names:
        topic = own_topics[name]
        figures = count_exact(private, topic, topic, PARTITIONS, source_id)
        checked, lost, duplicated = checked + figures.checked, lost + figures.lost, duplicated + figures.duplicated
        assert (figures.checked, figures.lost, figures.duplicated, figures.mismatched) == (
            PARTITIONS * PER_PARTITION, 0, 0, 0), (name, figures)
        # No cross-talk: this migration's state, syncs and checkpoints name only its own topics and groups.
        spec_state = MigrationStateStore(destination, load_spec(dags / "migrations" / f"{name}.yaml").state_topic_name
                                        ).read_all()
        progress_topics = {v["source_topic"] for v in spec_state.get(PROGRESS_KIND, {}).values()}
        assert progress_topics == {topic}, (name, progress_topics)
        # one batch, every record in it once: copied by the attempt that recorded it, or resumed by it from an attempt
        # that ended first (a task killed under load and retried; the exact count above is the proof of exactness)
        batches = list(spec_state.get(BATCH_KIND, {}).values())
        assert [b["records_copied"] + b["records_resumed"] for b in batches] == [PARTITIONS * PER_PARTITION], (
            name, batches)
        syncs = [OffsetSync.from_record(r.key, r.value)
                 for r in read_partition(private, "destination", offset_syncs_topic(f"dst-{name}"), 0)]
        assert {s.topic for s in syncs} == {topic}, name  # its own topic's syncs, no other migration's
        assert {s.partition for s in syncs} == set(range(PARTITIONS))
        assert all(s.upstream_offset == s.downstream_offset for s in syncs)  # identity: empty destination
        ours = {(c.topic, c.partition): c for c in checkpoints if c.consumer_group == f"{name}-app"}
        assert all(c.topic == topic for c in checkpoints if c.consumer_group.startswith(f"{name}-"))
        # identity rename, empty destination: a committed offset translates to itself
        assert {(t, p): (c.upstream_offset, c.downstream_offset) for (t, p), c in ours.items()} == {
            (topic, p): (o, o) for p, o in committed[name].items()}, name

    durations = sorted(r["finished_after_s"] for r in done.values())
    theirs = [c for c in checkpoints if c.consumer_group.split("-app")[0] in names]
    print(f"FAULT-MATRIX load: {MIGRATIONS} migrations x {PARTITIONS} partitions caught up at once on one Airflow "
          f"(LocalExecutor, PostgreSQL) and one Spark Connect server (local[2]): records checked {checked}, lost "
          f"{lost}, duplicated {duplicated}; all {len(done)} runs succeeded in {wall_s:.1f} s from trigger (first "
          f"{durations[0]:.1f} s, median {durations[len(durations) // 2]:.1f} s); seeding {seed_s:.1f} s; "
          f"{len(theirs)} checkpoints of their groups in the shared {checkpoints_topic(SOURCE_ALIAS)}, none crossed")


def _read_checkpoints(private) -> list[Checkpoint]:
    topic = checkpoints_topic(SOURCE_ALIAS)
    if topic not in private.admin("destination").list_topics(timeout=30).topics:
        return []
    return [Checkpoint.from_record(r.key, r.value) for r in read_partition(private, "destination", topic, 0)]
