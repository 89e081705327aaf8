"""A destination cluster other teams use: a migration changes only what it owns, and a dry run changes nothing.

Each test snapshots what both clusters hold for it (topics, configs, log bounds, records, groups and their
offsets, ACLs, the MM2 heartbeats of its flow) and compares after the refused or dry run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from airflow.sdk.exceptions import AirflowFailException
from dag_test_speed import QUICK_POLL
from scenarios import (
    commit_source_group,
    plan_and_copy_in_process,
    provision,
    provision_groups,
    seed_plain,
    snapshot,
    write_spec,
)

from kafka_ferry.core.provisioning.provisioning_plan import ProvisioningRefused
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.dag_factory import write_stubs
from kafka_ferry.operators.provision import MigrationPreflightOperator
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import checkpoint_translations, translate_migration

pytestmark = pytest.mark.integration

# The source's retention is a day, not an hour: the seeded records carry timestamps from an hour before the
# session began (scenarios.BASE_TS), and with an hour's retention the source broker deletes them minutes into a
# long session, so a test would read and copy nothing.
DAY, MONTH = str(24 * 3600 * 1000), str(30 * 24 * 3600 * 1000)


def shared_spec(tmp_path, clusters, p: str, **topics) -> str:
    """A spec of ``<p>.*`` whose MM2 topics (offset syncs, checkpoints, remote heartbeats) all carry ``p``."""
    return write_spec(tmp_path, clusters, p, source={"connection_id": clusters.SOURCE_CONN, "alias": f"s-{p}"},
                      topics={"include": [f"{p}\\..*"], **topics})


def foreign_topic(clusters, name: str, records: int) -> None:
    """Another team's topic on the destination: 30 days' retention, records of its own (no provenance)."""
    clusters.create_topic("destination", name, 1, {"retention.ms": MONTH})
    producer = clusters.producer("destination")
    for i in range(records):
        producer.produce(name, key=f"theirs-{i}".encode(), value=b"their record", partition=0)
    assert producer.flush(30) == 0


def retention(clusters, topic: str) -> str:
    return clusters.cluster("destination").describe_topics([topic])[topic].configs["retention.ms"]


def test_a_foreign_topic_with_a_mirrors_name_is_refused_at_preflight_and_nothing_changes(clusters, tmp_path):
    p = clusters.unique("own")
    topic = clusters.create_topic("source", f"{p}.orders", 1, {"retention.ms": DAY})
    seed_plain(clusters, topic, 1, 300)
    foreign_topic(clusters, topic, 5)
    spec_path = shared_spec(tmp_path, clusters, p)
    before = snapshot(clusters, p)

    with pytest.raises(AirflowFailException) as raised:
        MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})
    with pytest.raises(AirflowFailException):
        provision(spec_path)

    message = str(raised.value)
    assert isinstance(raised.value.__cause__, ProvisioningRefused)
    assert f"{topic}: exists on the destination and was not created by migration {p} (5 records; " in message
    assert f"retention.ms: '{MONTH}' -> '{DAY}'" in message
    assert snapshot(clusters, p) == before
    assert retention(clusters, topic) == MONTH


def test_adopting_an_empty_topic_shows_the_config_diff_and_takes_it_over(clusters, tmp_path, work_dir, configs_env):
    p = clusters.unique("adopt")
    topic = clusters.create_topic("source", f"{p}.orders", 1, {"retention.ms": DAY})
    seed_plain(clusters, topic, 1, 40)
    clusters.create_topic("destination", topic, 1, {"retention.ms": MONTH})
    spec_path = shared_spec(tmp_path, clusters, p, adopt=[topic])

    diff = MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})
    provision(spec_path)

    assert f"retention.ms: '{MONTH}' -> '{DAY}'" in diff["topics"]["ownership"]["adopt"][topic]
    assert retention(clusters, topic) == DAY
    from kafka_ferry.core.common.state_records import OWNED_TOPIC_KIND  # here: the test runs against older code too

    store = MigrationStateStore(clusters.cluster("destination"), load_spec(spec_path).state_topic_name)
    assert store.read_kind(OWNED_TOPIC_KIND)[topic]["how"] == "adopted"
    report = plan_and_copy_in_process(spec_path, configs_env)
    assert report["records_copied"] == 40
    # the next run provisions it as its own: it now holds only the migration's records
    again = MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})
    assert again["topics"]["ownership"]["owned"] == [topic]


def test_adopting_a_topic_with_foreign_records_is_refused_and_its_retention_kept(clusters, tmp_path):
    p = clusters.unique("adoptf")
    topic = clusters.create_topic("source", f"{p}.orders", 1, {"retention.ms": DAY})
    foreign_topic(clusters, topic, 5)
    spec_path = shared_spec(tmp_path, clusters, p, adopt=[topic])
    before = snapshot(clusters, p)

    with pytest.raises(AirflowFailException, match=r"topics.adopt lists it but 5 of its records were not written"):
        provision(spec_path)

    assert snapshot(clusters, p) == before
    assert retention(clusters, topic) == MONTH


@pytest.mark.parametrize(("partitions", "policy", "problem"), [
    (3, "compact", "3 partition(s) and cleanup.policy compact"), (1, "delete", "1 partition(s) and cleanup.policy "
                                                                               "delete")], ids=["partitions", "policy"])
def test_a_state_topic_of_another_shape_is_refused(clusters, tmp_path, partitions, policy, problem):
    p = clusters.unique("shape")
    clusters.create_topic("source", f"{p}.t", 1)
    state = clusters.create_topic("destination", f"kafka-ferry.{p}.state", partitions, {"cleanup.policy": policy})
    spec_path = shared_spec(tmp_path, clusters, p)
    before = snapshot(clusters, p)

    with pytest.raises(AirflowFailException, match=re.escape(f"state topic {state} has {problem}")):
        MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})
    with pytest.raises(AirflowFailException, match=re.escape(f"state topic {state} has {problem}")):
        provision(spec_path)

    assert snapshot(clusters, p) == before


# --- dry runs through a real DAG run -----------------------------------------------------------------------------

RUN = QUICK_POLL + textwrap.dedent("""
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    run = bag.get_dag(sys.argv[2]).test(run_conf={"mode": "dry-run"})
    tasks = {ti.task_id: {"state": str(ti.state), "try_number": ti.try_number} for ti in run.get_task_instances()}
    with create_session() as session:
        xcoms = {x.task_id: x.value for x in session.query(XComModel).filter(XComModel.run_id == run.run_id,
                                                                               XComModel.key == "return_value")}
    print("RESULT " + json.dumps({"state": str(run.state), "tasks": tasks, "xcoms": xcoms}, default=str))
""")


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory) -> dict:
    home = tmp_path_factory.mktemp("airflow")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], env=env, check=True,
                   capture_output=True, timeout=300)
    return env


def dry_run_dag(airflow_env: dict, tmp_path: Path, spec_path: str) -> tuple[dict, str]:
    dags = tmp_path / "dags"
    (dags / "migrations").mkdir(parents=True)
    doc = yaml.safe_load(Path(spec_path).read_text())
    (dags / "migrations" / f"{doc['name']}.yaml").write_text(yaml.safe_dump(doc))
    write_stubs(dags)
    env = {**airflow_env, "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "KFERRY_WORK_DIR": str(tmp_path / "dag-work")}
    done = subprocess.run([sys.executable, "-c", RUN, str(dags), f"kafka_ferry__{doc['name']}"], env=env,
                          capture_output=True, text=True, timeout=600)
    log = done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, log[-5000:]
    return json.loads(lines[0][7:]), log


def assert_dry_run_answered(result: dict, log: str) -> dict:
    """Every catch-up task succeeded in one try (the copy itself skipped); returns the tasks' XComs."""
    tasks = result["tasks"]
    assert result["state"] == "success", log[-5000:]
    for task in ("preflight", "provision_topics", "provision_groups", "plan_copy", "copy_report",
                 "translate_offsets"):
        assert (tasks[task]["state"], tasks[task]["try_number"]) == ("success", 1), (task, log[-5000:])
    assert tasks["copy_batch"]["state"] == "skipped"
    return {k: v if isinstance(v, dict) else json.loads(v) if isinstance(v, str) and v.startswith("{") else v
            for k, v in result["xcoms"].items()}


def test_a_dry_run_of_a_new_migration_shows_the_plan_and_changes_nothing(clusters, tmp_path, airflow_env):
    p = clusters.unique("dryn")
    topic = clusters.create_topic("source", f"{p}.orders", 2)
    seed_plain(clusters, topic, 2, 30)
    commit_source_group(clusters, f"{p}-g", {(topic, 0): 10, (topic, 1): 5})
    spec_path = shared_spec(tmp_path, clusters, p)
    before = snapshot(clusters, p)

    result, log = dry_run_dag(airflow_env, tmp_path, spec_path)

    xcoms = assert_dry_run_answered(result, log)
    assert snapshot(clusters, p) == before  # no state topic, no MM2 topic, no mirror, no group, no heartbeat
    assert before["destination"]["topics"] == {}
    assert xcoms["provision_topics"]["changes"] == [line for line in xcoms["preflight"]["topics"]["changes"]]
    assert xcoms["provision_topics"]["ownership"]["create"] == [topic]
    assert xcoms["provision_groups"]["migrated"] == {f"{p}-g": [topic]}
    plan = xcoms["plan_copy"]
    assert (plan["dry_run"], plan["partitions"], plan["offsets"]) == (True, 2, 60)
    assert plan["ranges"] == [f"{topic}-0 [0, 30) -> {topic}", f"{topic}-1 [0, 30) -> {topic}"]


def test_a_dry_run_of_a_running_migration_changes_nothing(clusters, tmp_path, airflow_env, work_dir, configs_env):
    p = clusters.unique("dryr")
    topic = clusters.create_topic("source", f"{p}.orders", 2)
    seed_plain(clusters, topic, 2, 30)
    commit_source_group(clusters, f"{p}-g", {(topic, 0): 10, (topic, 1): 5})
    spec_path = shared_spec(tmp_path, clusters, p)
    provision(spec_path)
    provision_groups(spec_path)
    plan_and_copy_in_process(spec_path, configs_env)
    spec = load_spec(spec_path)
    destination = clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    result = translate_migration(spec, clusters.cluster("source"), destination, store)
    assert checkpoint_translations(spec, destination, result.decisions) == 2
    seed_plain(clusters, topic, 2, 10, start=30)  # the next batch has work
    before = snapshot(clusters, p)

    dag_result, log = dry_run_dag(airflow_env, tmp_path, spec_path)

    xcoms = assert_dry_run_answered(dag_result, log)
    assert snapshot(clusters, p) == before  # state, checkpoints, offset syncs, mirrors, groups: as they were
    assert xcoms["provision_topics"]["ownership"]["owned"] == [topic]
    assert xcoms["plan_copy"]["ranges"] == [f"{topic}-0 [30, 40) -> {topic}", f"{topic}-1 [30, 40) -> {topic}"]
    assert xcoms["translate_offsets"]["dry_run"] is True and xcoms["translate_offsets"]["decisions"] == 2
