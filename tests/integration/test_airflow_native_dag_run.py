"""What Airflow shows of a migration (issue 29), through Airflow itself (dag.test): one catch-up batch and one
promotion, each read back from the real OpenLineage provider's file transport, Airflow's asset events in the
metadata DB, and a real StatsD listener (a UDP socket bound here) receiving the metrics Airflow's Stats sends.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import pytest
import yaml
from dag_test_speed import QUICK_POLL
from scenarios import one_group_migration, seed_plain

from kafka_ferry.dag_factory import write_stubs

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.long]

RUN = QUICK_POLL + textwrap.dedent("""
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    run = bag.get_dag(sys.argv[2]).test(run_conf=json.loads(sys.argv[3]))
    with create_session() as session:
        events = [{"uri": e.uri, "extra": e.extra, "aliases": [a.name for a in e.source_aliases],
                   "task_id": e.source_task_id} for e in session.query(AssetEvent).all()]
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    print("RESULT " + json.dumps({"state": str(run.state), "tasks": states, "events": events}))
""")


def statsd_port() -> int:
    """The listener's port: ``KFERRY_STATSD_TEST_PORT``, else one of this checkout's helper ports, else any."""
    if os.environ.get("KFERRY_STATSD_TEST_PORT"):
        return int(os.environ["KFERRY_STATSD_TEST_PORT"])
    base = os.environ.get("KFERRY_HELPER_PORT_BASE")
    return int(base) + 25 if base else 0


@pytest.fixture
def statsd():
    """A real StatsD listener: a UDP socket; ``received()`` drains what arrived (``name:value|type`` lines)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
    sock.bind(("127.0.0.1", statsd_port()))

    class Listener:
        port = sock.getsockname()[1]
        lines: list[str] = []

        def received(self) -> list[str]:
            sock.setblocking(False)
            while True:
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    return self.lines
                self.lines += data.decode().splitlines()

    with closing(sock):
        yield Listener()


def airflow_env(tmp_path: Path, dags: Path, statsd_port: int) -> dict:
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "KFERRY_WORK_DIR": str(tmp_path / "work"),
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "append": True,
                                                          "log_file_path": str(tmp_path / "lineage.jsonl")}),
           "AIRFLOW__OPENLINEAGE__NAMESPACE": "kferry-test",
           # the listener emits from a forked process it kills after execution_timeout (default 10 s): on a loaded
           # machine (CI's two lanes) a fork took longer and its event was lost
           "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "120",
           # and from a thread, not a fork, as docs/airflow-native.md advises: a fork copies the task process with
           # its Kafka clients' threads, and a child that finds a lock one of them held hangs (a CI run lost the
           # final copy's COMPLETE so: the child was killed after the 120 s)
           "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
           "AIRFLOW__METRICS__STATSD_ON": "True", "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
           "AIRFLOW__METRICS__STATSD_PORT": str(statsd_port), "AIRFLOW__METRICS__STATSD_PREFIX": "airflow"}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    env.pop("AIRFLOW__OPENLINEAGE__DISABLED", None)
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], env=env, check=True,
                   capture_output=True, timeout=300)
    return env


def run(dags: Path, dag_id: str, conf: dict, env: dict) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", RUN, str(dags), dag_id, json.dumps(conf)], env=env,
                          capture_output=True, text=True, timeout=900)
    log = done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, log[-6000:]
    return json.loads(lines[0][7:]), log


def lineage_events(tmp_path: Path, job_suffix: str) -> list[dict]:
    """The COMPLETE events of one task, as the OpenLineage file transport wrote them (one JSON a line)."""
    path = tmp_path / "lineage.jsonl"
    assert path.exists(), "the OpenLineage provider wrote no event"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e.get("eventType") == "COMPLETE" and e["job"]["name"].endswith(job_suffix)]


def kferry_metrics(lines: list[str], migration: str) -> dict[str, list[str]]:
    prefix = f"airflow.kafka_ferry.{migration}."
    out: dict[str, list[str]] = {}
    for line in lines:
        if line.startswith(prefix):
            name, _, value = line.partition(":")
            out.setdefault(name.removeprefix(prefix), []).append(value)
    return out


def test_a_catch_up_batch_emits_asset_events_lineage_and_metrics(clusters, tmp_path, statsd):
    p = clusters.unique("afn")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, 30)
    dags = tmp_path / "airflow" / "dags"
    (dags / "migrations").mkdir(parents=True)
    (dags / "migrations" / f"{p}.yaml").write_text(yaml.safe_dump({
        "name": p, "tenant": "test", "source": {"connection_id": clusters.SOURCE_CONN, "alias": "src"},
        "destination": {"connection_id": clusters.DESTINATION_CONN, "alias": f"dst-{p}"},
        "topics": {"include": [f"{p}\\..*"]}, "groups": {"include": [f"{p}-.*"], "allow_empty": True},
        "copy": {"spark_connection_id": clusters.SPARK_CONN}}))
    write_stubs(dags)
    env = airflow_env(tmp_path, dags, statsd.port)

    result, log = run(dags, f"kafka_ferry__{p}", {"mode": "catch-up"}, env)

    assert result["state"] == "success", log[-6000:]
    source_ns = f"kafka://{clusters.source_bootstrap.split(',')[0]}"
    destination_ns = f"kafka://{clusters.destination_bootstrap.split(',')[0]}"
    # one asset event for the mirror topic, through the migration's copy alias, with the batch's records and offsets
    (event,) = [e for e in result["events"] if e["uri"] == f"{destination_ns}/{topic}"]
    assert event["aliases"] == [f"kafka-ferry/{p}/copied"] and event["task_id"] == "copy_batch"
    assert event["extra"]["records"] == 60 and event["extra"]["offsets"] == {"0": [0, 30], "1": [0, 30]}
    # OpenLineage: the source topic in, the mirror out, the mirror naming its source in a symlinks facet
    (complete,) = lineage_events(tmp_path, ".copy_batch")
    assert [(d["namespace"], d["name"]) for d in complete["inputs"]] == [(source_ns, topic)]
    (output,) = complete["outputs"]
    assert (output["namespace"], output["name"]) == (destination_ns, topic)
    assert output["facets"]["symlinks"]["identifiers"] == [{"namespace": source_ns, "name": topic, "type": "TOPIC"}]
    # StatsD: the batch's records, bytes, lag before and after, duration, named per migration
    metrics = kferry_metrics(statsd.received(), p)
    assert metrics["batch.records_copied"] == ["60|c"], metrics
    assert metrics["batch.lag_before"] == ["60|g"] and metrics["batch.lag_after"] == ["0|g"]
    assert int(metrics["batch.bytes_copied"][0].removesuffix("|c")) > 0
    assert metrics["batch.duration"][0].endswith("|ms") and metrics["batch.count"] == ["1|c"]
    assert "translation.decisions" in metrics  # the catch-up translation after the batch


def test_a_promotion_marks_each_topic_promoted_with_lineage_and_step_timings(clusters, tmp_path, statsd):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "afnp", 2, 15, {0: 4, 1: 11})
    dags = tmp_path / "airflow" / "dags"
    dags.mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "airflow_dags" / "kf_promotion_test_dag.py", dags)
    env = {**airflow_env(tmp_path, dags, statsd.port), "KF_SPEC": spec_path}

    result, log = run(dags, "kf_promo_test", {"mode": "promote"}, env)

    assert result["state"] == "success", log[-6000:]
    destination_ns = f"kafka://{clusters.destination_bootstrap.split(',')[0]}"
    (event,) = [e for e in result["events"] if e["uri"] == f"{destination_ns}/{topic}"]
    assert event["aliases"] == [f"kafka-ferry/{spec.name}/promoted"]
    assert event["task_id"] == "promote_reconcile_mark"
    extra = event["extra"]
    assert (extra["kind"], extra["promoted"], extra["migration"], extra["source_topic"]) == (
        "promoted", True, spec.name, topic)
    assert {k: v[0] for k, v in extra["offsets"].items()} == {"0": 15, "1": 15}  # the source, copied to its end
    (complete,) = lineage_events(tmp_path, ".promote_reconcile_mark")
    (output,) = complete["outputs"]
    assert (output["namespace"], output["name"]) == (destination_ns, topic)
    assert output["facets"]["symlinks"]["identifiers"][0]["name"] == topic
    assert lineage_events(tmp_path, ".promote_final_copy")[0]["inputs"][0]["name"] == topic
    metrics = kferry_metrics(statsd.received(), spec.name)
    for step in ("final_copy", "final_translation", "commit_offsets", "reconcile", "mark_promoted"):
        assert metrics[f"promotion.{step}"][0].endswith("|ms"), (step, metrics)


def test_a_staged_topic_promotion_adds_a_promoted_event_and_names_its_lineage(clusters, tmp_path):
    from airflow.sdk import AssetAlias
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from kafka_ferry.operators.staged_promotion import PromoteGroupsOperator, PromoteTopicsOperator

    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "afns", 2, 6, {0: 2, 1: 6})
    PromoteGroupsOperator(task_id="promote_groups", spec_path=spec_path).execute(
        {"params": {"groups": [f"{p}-g"], "allow_rewind": False}, "run_id": "g1"})
    task, events = PromoteTopicsOperator(task_id="promote_topics", spec_path=spec_path, quiet_window_s=0.5), \
        OutletEventAccessors()

    task.execute({"params": {"topics": [topic]}, "run_id": "t1", "outlet_events": events})

    destination_ns = f"kafka://{clusters.destination_bootstrap.split(',')[0]}"
    (event,) = events[AssetAlias(f"kafka-ferry/{spec.name}/promoted")].asset_alias_events
    assert event.dest_asset_key.uri == f"{destination_ns}/{topic}"
    assert event.extra["promoted"] is True and event.extra["run_id"] == "t1"
    assert event.extra["offsets"] == {"0": [6, 6], "1": [6, 6]}  # copied to the source's end; mirror offsets equal
    lineage = task.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.outputs] == [(destination_ns, topic)]
    assert lineage.outputs[0].facets["symlinks"].identifiers[0].name == topic
