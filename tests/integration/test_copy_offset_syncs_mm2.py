"""Our offset-sync topic, decoded by Kafka's own OffsetSyncFormatter (connect-mirror), value by value."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
from scenarios import (
    REPO,
    assert_copied_exactly_once,
    plan_and_copy_in_process,
    provision,
    read_syncs,
    seed_plain,
    seed_transactional,
    write_spec,
)

from kafka_ferry.core.offsets.mm2_wire import offset_syncs_topic

pytestmark = pytest.mark.integration

LINE = re.compile(r"OffsetSync\{topicPartition=(?P<topic>.+)-(?P<partition>\d+), "
                  r"upstreamOffset=(?P<up>\d+), downstreamOffset=(?P<down>\d+)\}")


def kafka_formatter_syncs(clusters, topic: str, count: int) -> list[tuple[str, int, int, int]]:
    classpath = subprocess.run([sys.executable, str(REPO / "testbed" / "kafka_testbed.py"), "classpath"],
                               capture_output=True, text=True, check=True).stdout.strip()
    done = subprocess.run(
        [shutil.which("java") or "java", "-cp", classpath, "org.apache.kafka.tools.consumer.ConsoleConsumer",
         "--bootstrap-server", clusters.destination_bootstrap, "--topic", topic, "--from-beginning",
         "--formatter", "org.apache.kafka.connect.mirror.formatters.OffsetSyncFormatter",
         "--max-messages", str(count), "--timeout-ms", "30000"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"Processed a total of {count} messages" in done.stderr + done.stdout
    return [(m["topic"], int(m["partition"]), int(m["up"]), int(m["down"]))
            for m in map(LINE.fullmatch, done.stdout.splitlines()) if m]


def test_kafkas_offset_sync_formatter_reads_every_sync_we_wrote(clusters, tmp_path, work_dir, configs_env):
    p = clusters.unique("fmt")
    plain = clusters.create_topic("source", f"{p}.plain", 2)
    txn = clusters.create_topic("source", f"{p}.txn", 1)
    seed_plain(clusters, plain, 2, 45)
    seed_transactional(clusters, txn, 1, rounds=5)  # markers and aborts: discontinuities with both ends synced
    spec_path = write_spec(tmp_path, clusters, p)
    provision(spec_path)
    plan_and_copy_in_process(spec_path, configs_env)
    alias = f"dst-{p}"
    ours = [(t, part, up, down) for t in (plain, txn) for part, syncs in read_syncs(clusters, alias, t).items()
            for up, down in syncs]

    decoded = kafka_formatter_syncs(clusters, offset_syncs_topic(alias), len(ours))

    assert sorted(decoded) == sorted(ours) and len(decoded) == len(ours) > 0
    source_id = clusters.cluster("source").describe_cluster().cluster_id
    pairs = {(t, part): dict(pp) for t, n in ((plain, 2), (txn, 1))
             for part, pp in assert_copied_exactly_once(clusters, t, t, n, source_id).items()}
    for topic, partition, up, down in decoded:  # each value is a real (upstream, downstream) pair
        assert pairs[(topic, partition)][up] == down
    # with interval 10: the first record, at least every 10 records, both ends of each discontinuity, the last
    plain0 = sorted((u, d) for t, part, u, d in decoded if (t, part) == (plain, 0))
    assert plain0[0] == (0, 0) and plain0[-1] == (44, 44)
    assert all(b[0] - a[0] <= 10 for a, b in zip(plain0, plain0[1:], strict=False))
