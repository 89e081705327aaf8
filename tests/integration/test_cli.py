"""The `kafka-ferry` command (``python -m kafka_ferry.cli``) on the test bed: check, status, the promoted guard's
message through a real run, confirmation, reset-promotion."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import TopicPartition

from kafka_ferry.core.common.dates import iso_utc
from kafka_ferry.core.common.state_records import MIGRATION_KEY, PROMOTION_KIND
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.airflow]


@pytest.fixture
def workspace(tmp_path, clusters):
    """A DAGs folder with one spec (topic ``<p>.t``, group ``<p>-g``) and an AIRFLOW_HOME of its own; connections
    as environment variables (the clusters fixture's)."""
    p = clusters.unique("cli")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    spec = {"name": p, "tenant": "test", "source": {"connection_id": clusters.SOURCE_CONN, "alias": "src"},
            "destination": {"connection_id": clusters.DESTINATION_CONN, "alias": f"dst-{p}"},
            "topics": {"include": [f"{p}\\..*"]}, "copy": {"spark_connection_id": clusters.SPARK_CONN}}
    path = tmp_path / "dags" / "migrations" / f"{p}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if k not in ("AIRFLOW__CORE__UNIT_TEST_MODE", "AIRFLOW_HOME")}
    env.update(AIRFLOW_HOME=str(tmp_path / "airflow"), KFERRY_WORK_DIR=str(tmp_path / "work"))
    return p, topic, path, env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kafka_ferry(env, *args, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafka_ferry.cli", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=600, input=stdin)


def test_check_names_what_the_spec_selects_and_refuses_a_typo(workspace, clusters):
    p, topic, path, env = workspace
    ok = kafka_ferry(env, "check", path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"ok: connection '{clusters.SOURCE_CONN}' (kafka, source.connection_id): cluster " in ok.stdout
    assert f"ok: connection '{clusters.SPARK_CONN}' (spark, copy.spark_connection_id): Spark master local[2]" \
        in ok.stdout
    assert f"1 source topic(s) selected: {topic};" in ok.stdout

    spec = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**spec, "topics": {"include": [f"{p}\\.tt"]}}))
    typo = kafka_ferry(env, "check", path)
    assert typo.returncode == 1
    assert re.search(rf"topics\.include \['{re.escape(p)}\\\\\.tt'\] matched 0 of \d+ source topics; closest: "
                     rf"{re.escape(topic)}", typo.stdout), typo.stdout


def test_check_reaches_every_connection_names_each_and_suggests_a_close_id(workspace, clusters, registries):
    import schema_registries as srtb

    p, topic, path, env = workspace
    dead = f"127.0.0.1:{_free_port()}"
    env = {**env, "AIRFLOW_CONN_KF_CLI_SR_OLD": json.dumps({"conn_type": "schemaregistry", "host": srtb.SOURCE.url}),
           "AIRFLOW_CONN_KF_CLI_SR_NEW": json.dumps({"conn_type": "schema_registry", "host": f"http://{dead}"})}
    spec = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**spec, "schema_registry": {
        "source_connection_id": "kf_cli_sr_old", "destination_connection_id": "kf_cli_sr_new", "mode": "remap"}}))
    done = kafka_ferry(env, "check", path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith(f"ok: connection 'kf_cli_sr_old' (schemaregistry, schema_registry.source_connection_"
                               f"id): registry {srtb.SOURCE.url} answers: ") for line in lines), done.stdout
    assert any(line.startswith("FAILED: connection 'kf_cli_sr_new' (schema_registry, schema_registry.destination_"
                               f"connection_id): schema registry 'kf_cli_sr_new' (http://{dead}): ")
               for line in lines), done.stdout
    assert f"ok: connection '{clusters.DESTINATION_CONN}' (kafka, destination.connection_id)" in done.stdout

    as_json = kafka_ferry(env, "check", path, "--json")
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and report["ok"] is False
    assert {(v["connection_id"], v["ok"]) for v in report["connections"]} == {
        (clusters.SOURCE_CONN, True), (clusters.DESTINATION_CONN, True), (clusters.SPARK_CONN, True),
        ("kf_cli_sr_old", True), ("kf_cli_sr_new", False)}

    typo = {**spec, "destination": {**spec["destination"], "connection_id": clusters.DESTINATION_CONN[:-1]}}
    path.write_text(yaml.safe_dump(typo))
    done = kafka_ferry(env, "check", path)
    assert done.returncode == 1
    assert (f"'{clusters.DESTINATION_CONN[:-1]}': no Airflow connection with this id (did you mean "
            f"'{clusters.DESTINATION_CONN}'?)") in done.stdout, done.stdout


def test_a_dry_run_prints_the_first_batch_and_the_estimate_and_json_says_the_same(workspace, clusters):
    p, topic, path, env = workspace
    producer = clusters.producer("source")
    for _ in range(5):
        producer.produce(topic, key=b"k", value=b"v", partition=0)
    producer.flush(30)
    done = kafka_ferry(env, "dry-run", path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "  first batch (dry run, nothing copied): 1 partition(s), up to 5 offset(s)" in done.stdout, done.stdout
    assert f"    {topic}-0 [0, 5) -> {topic}" in done.stdout
    assert "  estimate: backlog: 5 offsets in 2 partition(s)" in done.stdout, done.stdout
    assert "ids \n" not in done.stdout and not done.stdout.rstrip().endswith("ids")

    as_json = kafka_ferry(env, "dry-run", path, "--json")
    doc = json.loads(as_json.stdout)
    assert as_json.returncode == 0 and doc["ok"] and doc["state"] == "success"
    assert f"{topic}-0 [0, 5) -> {topic}" in doc["first_batch"]["ranges"], doc["first_batch"]
    assert doc["first_batch"]["estimate"]["backlog_records"] == 5

    status = json.loads(kafka_ferry(env, "status", path, "--json").stdout)
    assert status["migration"] == p and status["promoted"] is False
    assert isinstance(status["ran"], bool) and ("lag_now" in status) == status["ran"]


def test_a_promoted_migration_refuses_a_run_with_the_date_and_the_command_until_reset(workspace, clusters):
    p, topic, path, env = workspace
    promoted_at = 1_795_596_628_236
    store = MigrationStateStore(clusters.cluster("destination"), f"kafka-ferry.{p}.state")
    store.ensure_topic()
    store.put(PROMOTION_KIND, MIGRATION_KEY, {"status": "promoted", "promoted_at_ms": promoted_at, "topics": [topic],
                                              "groups": []})

    status = kafka_ferry(env, "status", path)
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"  promoted: yes, at {iso_utc(promoted_at)} " in status.stdout and "T" in iso_utc(promoted_at)
    assert "  last batch: none yet" in status.stdout

    run = kafka_ferry(env, "run", path)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-4000:]
    # refused in the pre-flight, once, naming the way back (never the reset, which would throw it away)
    assert (f"was promoted at {iso_utc(promoted_at)}: mode 'catch-up' is refused, the destination is the system of "
            f"record now. To go back to the source, run mode 'rollback-plan' to see what a rollback would copy back "
            f"(kafka-ferry rollback-plan {path}), then mode 'rollback' (kafka-ferry rollback {path})") in out, \
        out[-4000:]
    assert "reset-promotion" not in out
    assert "1795596628236" not in out
    assert "preflight=failed" in run.stdout and "provision_topics=upstream_failed" in run.stdout

    refused = kafka_ferry(env, "reset-promotion", path, "--yes-i-mean", "other")
    assert refused.returncode == 2
    assert f"not confirmed: 'other' is not the migration's name '{p}'; nothing was done" in refused.stderr
    no_tty = kafka_ferry(env, "reset-promotion", path, stdin="")
    assert no_tty.returncode == 2 and f"pass --yes-i-mean {p}" in no_tty.stderr
    assert "  promoted: yes" in kafka_ferry(env, "status", path).stdout

    # a rollback is possible: the reset refuses in one try, saying why and naming the rollback; nothing changes
    kept = kafka_ferry(env, "reset-promotion", path, "--yes-i-mean", p)
    assert kept.returncode == 1, kept.stdout + kept.stderr
    assert "can still be rolled back" in kept.stdout and f"kafka-ferry rollback {path}" in kept.stdout
    assert "--give-up-rollback" in kept.stdout and "nothing was changed" in kept.stdout
    assert "  promoted: yes" in kafka_ferry(env, "status", path).stdout

    reset = kafka_ferry(env, "reset-promotion", path, "--yes-i-mean", p, "--give-up-rollback")
    assert reset.returncode == 0 and "promotion record(s) removed" in reset.stdout, reset.stdout + reset.stderr
    assert f"the rollback of {p} is given up (--give-up-rollback)" in reset.stdout
    assert "  promoted: no" in kafka_ferry(env, "status", path).stdout


def test_status_shows_a_failed_run_with_its_failed_task(workspace, clusters):
    """`status` reads Airflow's metadata DB: the run that failed (the pre-flight refused a rollback plan of a name no
    topic can have), which task and since when; the command sent the form's fields."""
    p, topic, path, env = workspace
    plan = kafka_ferry(env, "rollback-plan", path, "--topics", "not a topic!")
    assert plan.returncode == 1, plan.stdout + plan.stderr
    assert "in mode rollback-plan" in plan.stdout and "not a Kafka topic name" in plan.stdout + plan.stderr
    assert "preflight=failed" in plan.stdout and "rollback=upstream_failed" in plan.stdout
    status = kafka_ferry(env, "status", path)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "(mode rollback-plan): failed, started " in status.stdout, status.stdout
    assert re.search(r"preflight: FAILED since \d{4}-\d\d-\d\dT", status.stdout), status.stdout


def test_acls_lists_the_minimum_and_apart_the_acls_only_a_rollback_needs(workspace, clusters):
    p, topic, path, env = workspace
    group = f"{p}-g"
    consumer = clusters.consumer("source", group)  # a committed group the spec selects
    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    consumer.close()
    path.write_text(path.read_text() + f"groups: {{include: ['{p}-.*']}}\n")
    done = kafka_ferry(env, "acls", path)
    assert done.returncode == 0, done.stdout + done.stderr
    always, rollback = done.stdout.split("rollback only")
    assert "1 topic(s), 1 group(s) selected now" in always
    assert f"source: ALLOW READ on TOPIC '{topic}' for User:ANONYMOUS" in always  # PLAINTEXT: the anonymous user
    assert f"source: ALLOW WRITE on TOPIC '{topic}'" not in always  # the catch-up never writes the source
    assert f"source: ALLOW WRITE on TOPIC '{topic}' for User:ANONYMOUS (copy back" in rollback
    assert f"source: ALLOW READ on GROUP '{group}' for User:ANONYMOUS (commit" in rollback
    assert f"'kafka-ferry.{p}.state.rollback'" in rollback
    # the copy-back's topics are read after a rollback too: reading them stays granted, creating them does not
    assert f"source: ALLOW DESCRIBE on TOPIC 'kafka-ferry.{p}.state.rollback' for User:ANONYMOUS" in always
    assert f"source: ALLOW CREATE on TOPIC 'kafka-ferry.{p}.state.rollback'" in rollback
    assert f"source: ALLOW DESCRIBE on TOPIC 'kafka-ferry.{p}.state.rollback'" not in rollback


def test_a_spec_outside_a_migrations_folder_is_refused_with_the_layout(tmp_path):
    path = tmp_path / "loose.yaml"
    path.write_text("name: x\n")
    done = kafka_ferry({**os.environ, "AIRFLOW_HOME": str(tmp_path / "af")}, "status", path)
    assert done.returncode == 2
    assert "a migration spec lives in <dags folder>/migrations/" in done.stderr


def test_the_package_installs_a_kafka_ferry_console_script(tmp_path):
    """`[project.scripts]`: a non-editable install (into a directory of its own, not the shared venv) puts a
    `kafka-ferry` command beside it that runs the CLI from that install."""
    repo = Path(__file__).resolve().parents[2]
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, source / name)
    shutil.copytree(repo / "plugins", source / "plugins", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                          str(source)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-3000:]
    script = site / "bin" / "kafka-ferry"
    assert script.exists(), sorted(p.name for p in (site / "bin").glob("*")) if (site / "bin").exists() else "no bin"
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr[-3000:]
    for command in ("check", "dry-run", "run", "promote", "promote-groups", "promote-topics", "rollback",
                    "rollback-plan", "status", "reset-promotion", "acls"):
        assert command in done.stdout


def test_check_status_and_acls_write_no_dag_file(workspace):
    """Issue 36 (case 8): `check` changes nothing, yet wrote a DAG stub for every YAML in the folder."""
    p, _, path, env = workspace
    other = yaml.safe_load(path.read_text())
    (path.parent / "other-spec.yaml").write_text(yaml.safe_dump({**other, "name": f"{p}-other"}))

    def listing():
        return sorted(str(f.relative_to(path.parent.parent)) for f in path.parent.parent.rglob("*"))

    before = listing()
    for command in ("check", "status", "acls"):
        done = kafka_ferry(env, command, path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert listing() == before, command
    # a second file with this name: check refuses it as the DAG processor would, naming it (issue 36, case 1)
    shutil.copy(path, path.parent / "twin.yaml")
    twin = kafka_ferry(env, "check", path)
    assert twin.returncode == 1
    assert f"{path.parent / 'twin.yaml'} has this name too" in twin.stdout, twin.stdout


@pytest.mark.long
@pytest.mark.spark
def test_a_term_during_the_copy_stops_the_command_marks_the_run_failed_and_the_same_command_continues(
        workspace, clusters):
    """`kafka-ferry run` gets a real SIGTERM while its Spark copy runs (the task runner's own SIGTERM handler used to
    swallow it): it exits 143 at once with one line naming the run, the task and the way on, leaves no process of
    its own running, `status` shows the run failed at that task, and the command it names copies every record."""
    import psutil

    p, topic, path, env = workspace
    producer = clusters.producer("source")
    for i in range(20):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v", partition=i % 2)
    producer.flush(30)
    with subprocess.Popen([sys.executable, "-m", "kafka_ferry.cli", "run", str(path)], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None  # both piped
        try:
            seen = []
            for line in proc.stdout:  # waits for the watcher's line, however long the pre-flight takes
                seen.append(line)
                if "copy_batch: running" in line:
                    break
            assert any("copy_batch: running" in line for line in seen), "".join(seen) + proc.stderr.read()
            started = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
            proc.send_signal(signal.SIGTERM)
            rest, err = proc.communicate(timeout=300)  # generous; no timing is asserted
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, "".join(seen) + rest + err
    stop = [line for line in err.splitlines() if line.startswith("kafka-ferry: stopped by SIGTERM")]
    assert len(stop) == 1, err[-4000:]
    assert re.search(r"at task copy_batch; run \S+ \(mode catch-up\) marked failed in Airflow's metadata DB", stop[0])
    assert f"`kafka-ferry run {path}`" in stop[0] and f"`kafka-ferry status {path}`" in stop[0], stop[0]
    assert not [pid for pid in started if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE], "a process of the command outlived it"

    status = kafka_ferry(env, "status", path)
    assert "(mode catch-up): failed, started " in status.stdout, status.stdout
    assert re.search(r"copy_batch: FAILED since \d{4}-\d\d-\d\dT", status.stdout), status.stdout

    again = kafka_ferry(env, "run", path)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    # every record once on the destination (a copy stopped mid-transaction left only aborted records)
    reader = clusters.consumer("destination", **{"isolation.level": "read_committed"})
    try:
        reader.assign([TopicPartition(topic, part, 0) for part in (0, 1)])
        keys: list[bytes] = []
        deadline = time.monotonic() + 120
        while len(keys) < 20 and time.monotonic() < deadline:
            keys += [m.key() or b"" for m in reader.consume(100, timeout=1) if m.error() is None]
        extra = [m for m in reader.consume(100, timeout=3) if m.error() is None]
    finally:
        reader.close()
    assert sorted(keys) == sorted(f"k{i}".encode() for i in range(20)) and not extra, keys
