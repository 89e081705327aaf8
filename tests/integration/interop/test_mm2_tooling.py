"""MirrorMaker 2's own client tooling reads what kafka-ferry writes: RemoteClusterUtils (connect-mirror-client),
run as a small Java program against the destination, translates a group to the offsets our promotion
committed, and sees the source alias upstream through our heartbeats."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from scenarios import one_group_migration, run_batch

import kafka_testbed as tb
from kafka_ferry.core.offsets.mm2_wire import HEARTBEATS_TOPIC, Heartbeat, remote_heartbeats_topic
from kafka_ferry.operators.translation import TranslateOffsetsOperator
from kafka_ferry.promotion.steps import PromotionRunner

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PROBE = Path(__file__).with_name("RemoteClusterUtilsProbe.java")


def probe(bootstrap: str, alias: str, *groups: str) -> list[str]:
    cmd = [tb._java(), "-cp", tb.classpath(tb.DESTINATION.kafka_version), str(PROBE), bootstrap, alias, *groups]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_remote_cluster_utils_translates_to_our_commits_and_sees_the_source_upstream(clusters, tmp_path,
                                                                                    work_dir, spark_on_path):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "mm2tool", 2, 50, {0: 17, 1: 33})
    report = run_batch(spec_path, clusters.SPARK_CONN)  # plan, copy, report: one heartbeat
    TranslateOffsetsOperator(task_id="translate", spec_path=spec_path).execute({})
    promoted = PromotionRunner(spec, clusters.cluster("source"), clusters.cluster("destination"),
                               work_dir=work_dir).run()
    assert report["records_copied"] == 100 and promoted["status"] == "promoted"
    committed = clusters.cluster("destination").group_offsets(f"{p}-g")

    lines = probe(clusters.destination_bootstrap, spec.source.alias, f"{p}-g")

    translated = {(t, int(q)): int(o) for _, _, t, q, o in (line.split() for line in lines
                                                             if line.startswith("offset "))}
    assert translated == committed == {(topic, 0): 17, (topic, 1): 33}
    assert spec.source.alias in lines[0].split(" ", 1)[1].split(",")
    assert lines[1] == "replicationHops 1"
    destination = clusters.cluster("destination")
    for heartbeat_topic in (HEARTBEATS_TOPIC, remote_heartbeats_topic(spec.source.alias)):
        from kafka_ferry.kafka.reads import read_whole_partitions

        beats = [Heartbeat.from_record(m.key(), m.value()) for m in read_whole_partitions(destination,
                                                                                           [(heartbeat_topic, 0)])]
        assert any((b.source_alias, b.target_alias) == (spec.source.alias, spec.destination.alias)
                   and b.timestamp_ms == report["finished_at_ms"] for b in beats)
