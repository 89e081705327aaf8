"""Helpers of the fault matrix: volume seeding, the copy job as a killable process, the record-by-record count.

Every fault test ends with `count_exact`: each source record's key, value, headers and timestamp must be on
the destination exactly once (by provenance), in order; it returns the figures the tests print.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from scenarios import REPO, read_partition

from kafka_ferry.core.offsets.provenance import read_provenance, user_headers
from kafka_ferry.kafka.configs import encode_cluster_configs


@dataclass
class Figures:
    checked: int = 0
    lost: int = 0
    duplicated: int = 0
    mismatched: int = 0

    def line(self, row: str, recover_s: float | None = None) -> str:
        recover = f", time to recover {recover_s:.1f} s" if recover_s is not None else ""
        return (f"FAULT-MATRIX {row}: records checked {self.checked}, lost {self.lost}, duplicated "
                f"{self.duplicated}, mismatched {self.mismatched}{recover}")


def seed_volume(clusters, topic: str, partitions: int, per_partition: int, value_size: int = 300) -> None:
    """Many records fast: distinct key/value/timestamp per record, a header on every 10th."""
    producer = clusters.producer("source", **{"linger.ms": 50, "batch.size": 1_000_000,
                                              "queue.buffering.max.messages": 1_000_000})
    base = (int(time.time()) - 3600) * 1000
    for p in range(partitions):
        for i in range(per_partition):
            headers = [("n", str(i).encode())] if i % 10 == 0 else None
            while True:
                try:
                    producer.produce(topic, key=f"k{i}".encode(), value=f"{p}:{i}:".encode().ljust(value_size, b"x"),
                                     partition=p, timestamp=base + i, headers=headers)
                    break
                except BufferError:
                    producer.poll(0.1)
    assert producer.flush(60) == 0


def configs_env(clusters) -> str:
    return encode_cluster_configs(clusters.cluster("source").client_config,
                                  clusters.cluster("destination").client_config)


def start_copy_job(plan_path: str, env_configs: str, log_path: Path) -> subprocess.Popen:
    """The copy job without Spark in its own process group (so a kill takes all of it)."""
    env = {**os.environ, "KFERRY_CLUSTER_CONFIGS": env_configs}
    env.pop("KFERRY_FAULT", None)
    cmd = [sys.executable, str(REPO / "spark_jobs" / "copy_batch.py"), "--plan", plan_path, "--in-process"]
    with open(log_path, "ab") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


def copied_so_far(clusters, topic: str, partitions: int) -> int:
    """The destination's high watermarks, summed. Through the session's kept-alive AdminClient: a new client per
    poll (a hook per call) stalled 1-3 s now and then, so a kill meant for 10 % of the batch landed at its end."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    deadline = time.monotonic() + 30
    while True:
        futures = clusters.admin("destination").list_offsets(request, request_timeout=30)
        try:
            return sum(future.result(30).offset for future in futures.values())
        except KafkaException as exc:
            # a topic just made: the kept client may not know its leader yet (NOT_LEADER_FOR_PARTITION, seen
            # once in CI); a transient error is asked again, anything else fails the test
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def wait_until_copied(clusters, topic: str, partitions: int, at_least: int, proc: subprocess.Popen,
                      timeout_s: float = 120) -> int:
    """Poll the destination until `at_least` records landed; fails if the job ended first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        landed = copied_so_far(clusters, topic, partitions)
        if landed >= at_least:
            return landed
        assert proc.poll() is None, f"the copy job ended (rc {proc.returncode}) before the fault could hit it"
        time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} records copied in {timeout_s} s")


def run_to_success(plan_path: str, env_configs: str, log_path: Path, attempts: int = 4) -> int:
    """The Airflow retries of copy_batch: rerun the same plan until it succeeds; returns the attempts used."""
    for attempt in range(1, attempts + 1):
        proc = start_copy_job(plan_path, env_configs, log_path)
        if proc.wait(600) == 0:
            return attempt
    raise AssertionError(f"copy job still failing after {attempts} attempts; see {log_path}: "
                         + log_path.read_text()[-3000:])


def count_exact(clusters, source_topic: str, destination_topic: str, partitions: int, source_id: str) -> Figures:
    """Record by record: which source records are missing, doubled or different on the destination."""
    figures = Figures()
    for p in range(partitions):
        source = read_partition(clusters, "source", source_topic, p)
        seen: dict[int, int] = {}
        by_offset = {r.offset: r for r in source}
        last = -1
        for d in read_partition(clusters, "destination", destination_topic, p):
            cluster, upstream = read_provenance(d.headers)
            assert cluster == source_id, f"{destination_topic}-{p}@{d.offset}: foreign record"
            # (a copied record without its source offset would count as mismatched, which fails the same checks)
            assert upstream is not None, f"{destination_topic}-{p}@{d.offset}: no source offset"
            seen[upstream] = seen.get(upstream, 0) + 1
            s = by_offset.get(upstream)
            if s is None or (d.key, d.value, d.timestamp, tuple(user_headers(d.headers))) != (
                    s.key, s.value, s.timestamp, s.headers) or upstream <= last:
                figures.mismatched += 1
            last = upstream
        figures.checked += len(source)
        figures.lost += sum(1 for r in source if r.offset not in seen)
        figures.duplicated += sum(n - 1 for n in seen.values())
    return figures


def check_caught_up_exactly(clusters, spec_path: str, topic: str, partitions: int, expected: int, row: str,
                            recover_s: float | None = None) -> Figures:
    """The closing check of a fault row: the next batch finds nothing left, then every record exactly once."""
    from scenarios import plan_and_copy_in_process

    after = plan_and_copy_in_process(spec_path, configs_env(clusters))
    assert after["partitions_planned"] == 0, after
    source_id = clusters.cluster("source").describe_cluster().cluster_id
    figures = count_exact(clusters, topic, topic, partitions, source_id)
    print(figures.line(row, recover_s))
    assert figures.checked == expected
    assert (figures.lost, figures.duplicated, figures.mismatched) == (0, 0, 0)
    return figures


def progress_of(clusters, spec_state_topic: str) -> dict:
    from kafka_ferry.core.common.state_records import PROGRESS_KIND
    from kafka_ferry.state.store import MigrationStateStore

    return MigrationStateStore(clusters.cluster("destination"), spec_state_topic).read_kind(PROGRESS_KIND)


def dump(obj) -> str:
    return json.dumps(obj, sort_keys=True, default=str)
