"""A fleet-shaped tenant promoted through the DAG: 50 topics x 4 partitions, 50 groups, every group exact after it.

The scale path is a correctness path too (issue 39): the batched group reads and commits of a promotion
(``KafkaCluster.groups_offsets``, ``commit_translated_offsets``) must land every group's every partition where its
source commit was, not only the one group of the small scenarios. ``bench/fleet.py`` is the same scenario timed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic
from dag_test_speed import QUICK_POLL
from scenarios import provision, provision_groups, seed_plain, write_spec

from kafka_ferry.core.specs.spec import load_spec

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

TOPICS, PARTITIONS, GROUPS, PER_PARTITION = 50, 4, 50, 5

RUN = QUICK_POLL + textwrap.dedent("""
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    run = bag.get_dag("kf_promo_test").test(run_conf={"mode": "promote", "confirm_migration": sys.argv[2]})
    print("RESULT " + json.dumps({"state": str(run.state)}))
""")


def _create_topics(clusters, names: list[str]) -> None:
    """All in one CreateTopics, then wait until the metadata shows every one (the provisioning lists them at once)."""
    admin = clusters.admin("source")
    for future in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        future.result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        listed = admin.list_topics(timeout=30).topics
        if all(n in listed and len(listed[n].partitions) == PARTITIONS for n in names):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{len(names)} topics not all in the source's metadata 60 s after they were created")


def _delete_topics(clusters, names: list[str]) -> None:
    for side in ("source", "destination"):
        admin = clusters.admin(side)
        existing = [n for n in names if n in admin.list_topics(timeout=30).topics]
        for future in (admin.delete_topics(existing).values() if existing else ()):
            future.result(60)


def _committed(clusters, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = clusters.admin("destination")
    out = {}
    for group in groups:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(60)
        out[group] = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}
    return out


def test_every_group_of_a_fleet_is_exact_after_a_dag_promotion(clusters, tmp_path):
    p = clusters.unique("fleet")
    topics = [f"{p}.t{i:02d}" for i in range(TOPICS)]
    groups = [f"{p}-g{i:02d}" for i in range(GROUPS)]
    try:
        _create_topics(clusters, topics)
        for topic in topics:
            seed_plain(clusters, topic, PARTITIONS, PER_PARTITION)
        rng = random.Random(39)
        source_commits = {}
        for i, group in enumerate(groups):  # each group on every partition of two topics, anywhere in the data
            offsets = {(t, q): rng.randint(0, PER_PARTITION) for t in {topics[i], topics[(i + 1) % TOPICS]}
                       for q in range(PARTITIONS)}
            consumer = clusters.consumer("source", group)
            consumer.commit(offsets=[TopicPartition(t, q, o) for (t, q), o in offsets.items()], asynchronous=False)
            consumer.close()
            source_commits[group] = offsets
        spec_path = write_spec(tmp_path, clusters, p)
        spec = load_spec(spec_path)
        provision(spec_path)
        assert sorted(provision_groups(spec_path)["migrated"]) == groups

        home, dags = tmp_path / "airflow", tmp_path / "airflow" / "dags"
        dags.mkdir(parents=True)
        shutil.copy(Path(__file__).parent / "airflow_dags" / "kf_promotion_test_dag.py", dags)
        env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
               "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "KF_SPEC": spec_path,
               "KFERRY_WORK_DIR": str(tmp_path / "work")}
        env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
        airflow = str(Path(sys.executable).parent / "airflow")
        subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
        done = subprocess.run([sys.executable, "-c", RUN, str(dags), spec.name], env=env, capture_output=True,
                              text=True, timeout=900)
        result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        assert result and json.loads(result[0][7:])["state"] == "success", (done.stdout + done.stderr)[-4000:]

        report = json.loads((tmp_path / "work" / spec.name / "promotion-report.json").read_text())
        assert report["status"] == "promoted" and report["reconciliation"]["ok"]
        after = _committed(clusters, groups)
        wrong = {g: {tp: (want, after[g].get(tp)) for tp, want in offsets.items() if after[g].get(tp) != want}
                 for g, offsets in source_commits.items()}
        assert {g: w for g, w in wrong.items() if w} == {}
        assert sum(len(o) for o in after.values()) == GROUPS * 2 * PARTITIONS
    finally:
        _delete_topics(clusters, topics)
