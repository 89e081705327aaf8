"""Helpers of the copy tests: seed the source, run a batch the way the DAG does, read partitions back.

Imported by the test modules of this folder (pytest puts it on sys.path); clients come from the
session's ``clusters`` fixture, never from configs built here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from confluent_kafka import TopicPartition

from kafka_ferry.core.mm2_wire import OffsetSync, offset_syncs_topic
from kafka_ferry.core.offset_translation import translate_exact
from kafka_ferry.core.provenance import read_provenance, user_headers
from kafka_ferry.operators.copy import CopyBatchSparkOperator, CopyReportOperator, PlanCopyBatchOperator
from kafka_ferry.operators.provision import ProvisionMirrorTopicsOperator

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int


def write_spec(tmp_path, clusters, prefix: str, **copy_overrides) -> str:
    spec = {
        "name": prefix.lower(),
        "tenant": "test",
        "source": {"connection_id": clusters.SOURCE_CONN, "alias": "src"},
        "destination": {"connection_id": clusters.DESTINATION_CONN, "alias": f"dst-{prefix}"},
        "topics": {"include": [f"{prefix}\\..*"]},
        "groups": {"include": [f"{prefix}-.*"]},
        "copy": {"spark_connection_id": clusters.SPARK_CONN, "offset_sync_interval": 10, **copy_overrides},
    }
    path = tmp_path / f"{prefix}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def provision(spec_path: str) -> None:
    ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=spec_path).execute({})


class _TaskInstance:
    """Test seam for the XCom hand-over between the DAG's tasks (the operators run for real)."""

    def __init__(self) -> None:
        self.xcom: dict[str, object] = {}

    def xcom_pull(self, task_ids: str):
        return self.xcom.get(task_ids)


def run_batch(spec_path: str, spark_conn: str, env: dict | None = None) -> dict:
    """plan_copy >> copy_batch >> report, as in the DAG; returns the full JSON report the report task read."""
    ti = _TaskInstance()
    context = {"ti": ti}
    ti.xcom["plan_copy"] = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute(context)
    copy = CopyBatchSparkOperator(task_id="copy_batch", spec_path=spec_path, conn_id=spark_conn,
                                  env_vars={"PYSPARK_PYTHON": sys.executable, **(env or {})})
    try:
        copy.execute(context)
    except Exception as exc:  # noqa: BLE001 - Airflow's skip is a control-flow exception
        if type(exc).__name__ != "AirflowSkipException":
            raise
    summary = CopyReportOperator(task_id="report", spec_path=spec_path).execute(context)
    return json.loads(Path(summary["report_path"]).read_text())


def spark_submit(plan_path: str, configs_env: str, master: str = "local[2]", fault: str | None = None,
                 timeout: float = 300) -> subprocess.CompletedProcess:
    """spark-submit copy_batch.py directly (the crash tests need its exit code and stderr)."""
    from kafka_ferry.copy.packaging import build_package_zip

    package = build_package_zip(Path(plan_path).parent / "packages")
    env = {**os.environ, "KFERRY_CLUSTER_CONFIGS": configs_env, "PYSPARK_PYTHON": sys.executable}
    env.pop("KFERRY_FAULT", None)
    if fault:
        env["KFERRY_FAULT"] = fault
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", master, "--py-files", str(package),
           str(REPO / "spark_jobs" / "copy_batch.py"), "--plan", plan_path]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def read_partition(clusters, side: str, topic: str, partition: int) -> list[Record]:
    """Every record of a partition as read_committed sees it, start to last stable offset."""
    admin_side = clusters.cluster(side)
    tp = (topic, partition)
    start = admin_side.list_offsets([tp], "earliest")[tp]
    end = admin_side.list_offsets([tp], "latest", read_committed=True)[tp]
    out: list[Record] = []
    if start >= end:
        return out
    consumer = clusters.consumer(side, **{"isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                assert msg.error() is None, msg.error()
                if msg.offset() < end:
                    out.append(Record(msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                                      msg.timestamp()[1]))
            if consumer.position([TopicPartition(topic, partition)])[0].offset >= end:
                return out
        raise AssertionError(f"{side} {topic}-{partition} not read to {end} in 60 s")
    finally:
        consumer.close()


def assert_copied_exactly_once(clusters, source_topic: str, destination_topic: str, partitions: int,
                               source_cluster_id: str, rewriter=None) -> dict[int, list[tuple[int, int]]]:
    """Record by record: same key, value, user headers, timestamp and order, each source record once.

    `rewriter` (a remap migration's SchemaIdRewriter): source keys and values are compared as the destination
    must hold them, with their schema ids rewritten. Returns the (upstream, downstream) pair of every copied
    record, per partition.
    """
    expected = rewriter.normalise if rewriter is not None else (lambda payload: payload)
    pairs = {}
    for p in range(partitions):
        src = read_partition(clusters, "source", source_topic, p)
        dst = read_partition(clusters, "destination", destination_topic, p)
        assert len(dst) == len(src), f"{source_topic}-{p}: {len(src)} source records, {len(dst)} on destination"
        for s, d in zip(src, dst, strict=True):
            cluster, upstream = read_provenance(d.headers)
            assert (cluster, upstream) == (source_cluster_id, s.offset), f"{source_topic}-{p} record {s}"
            assert (d.key, d.value, d.timestamp) == (expected(s.key), expected(s.value), s.timestamp), (
                f"{source_topic}-{p} {s} {d}")
            assert tuple(user_headers(d.headers)) == s.headers, f"{source_topic}-{p} headers {s} {d}"
        pairs[p] = [(s.offset, d.offset) for s, d in zip(src, dst, strict=True)]
    return pairs


def read_syncs(clusters, alias: str, source_topic: str) -> dict[int, list[tuple[int, int]]]:
    """Our offset syncs for one source topic, decoded with kafka_ferry's codec, per partition."""
    topic = offset_syncs_topic(alias)
    syncs: dict[int, list[tuple[int, int]]] = {}
    for r in read_partition(clusters, "destination", topic, 0):
        sync = OffsetSync.from_record(r.key, r.value)
        if sync.topic == source_topic:
            syncs.setdefault(sync.partition, []).append((sync.upstream_offset, sync.downstream_offset))
    return syncs


def assert_syncs_exact(syncs: list[tuple[int, int]], pairs: list[tuple[int, int]], copied_end: int) -> None:
    """Every sync is a real (upstream, downstream) pair, and the sparse log translates every record exactly."""
    real = dict(pairs)
    assert syncs, "no offset syncs"
    for up, down in syncs:
        assert real.get(up) == down, f"sync ({up}, {down}) is not a copied record"
    for up, down in pairs:
        assert translate_exact(syncs, up, copied_end).downstream_offset == down, (up, down)


def check_all(clusters, spec_alias, topics, source_id) -> int:
    copied = 0
    for topic, partitions in topics:
        pairs = assert_copied_exactly_once(clusters, topic, topic, partitions, source_id)
        syncs = read_syncs(clusters, spec_alias, topic)
        for p, partition_pairs in pairs.items():
            if partition_pairs:
                end = clusters.cluster("source").list_offsets([(topic, p)], "latest")[(topic, p)]
                assert_syncs_exact(syncs.get(p, []), partition_pairs, end)
            copied += len(partition_pairs)
    return copied


def produce_and_wait(producer) -> None:
    assert producer.flush(30) == 0


# Explicit CreateTimes an hour back: distinct from append time (a lost timestamp shows), young enough
# for the topics' 7-day time retention.
BASE_TS = (int(time.time()) - 3600) * 1000


def seed_plain(clusters, topic: str, partitions: int, per_partition: int, start: int = 0) -> None:
    """Keys, values, headers (some repeated names, some None), tombstones and explicit timestamps."""
    producer = clusters.producer("source")
    for p in range(partitions):
        for i in range(start, start + per_partition):
            headers = [("h", f"{p}-{i}".encode()), ("h", b"second")] if i % 3 == 0 else None
            if i % 7 == 0:
                headers = [("empty", None), ("bin", bytes([0, 255, i % 256]))]
            value = None if i % 11 == 5 else f"value-{p}-{i}".encode() * (1 + i % 4)
            producer.produce(topic, key=f"k{i % 50}".encode() if i % 13 else None, value=value, partition=p,
                             timestamp=BASE_TS + i * 1000 + p, headers=headers)
    produce_and_wait(producer)


def seed_transactional(clusters, topic: str, partitions: int, rounds: int, per_txn: int = 5,
                       transactional_id: str | None = None) -> None:
    """Committed and aborted transactions on every partition, ending with an aborted one (trailing markers)."""
    producer = clusters.producer("source", **{"transactional.id": transactional_id or f"{topic}-txn"})
    producer.init_transactions(30)
    for r in range(rounds):
        producer.begin_transaction()
        for p in range(partitions):
            for i in range(per_txn):
                producer.produce(topic, key=f"t{r}-{i}".encode(), value=f"{'commit' if r % 3 != 1 else 'abort'}-{r}-"
                                 f"{p}-{i}".encode(), partition=p, timestamp=BASE_TS + r * 100 + i,
                                 headers=[("round", str(r).encode())])
        producer.flush(30)  # aborted records must really reach the log, not be purged from the queue
        if r % 3 == 1 or r == rounds - 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


def seed_compacted_with_holes(clusters, topic: str, partitions: int, rounds: int = 6, keys: int = 20) -> None:
    """Rewrite the same keys over several segments, wait until the cleaner left holes, then freeze the log.

    The topic must be created with cleanup.policy=compact, segment.ms ~100, min.cleanable.dirty.ratio 0.01,
    delete.retention.ms 0 and min.compaction.lag.ms 0.
    """
    producer = clusters.producer("source")
    for r in range(rounds):
        for p in range(partitions):
            for k in range(keys):
                # keys seen once survive compaction around the rewritten ones: holes inside the log
                key = f"once-{r}-{k}" if k % 4 == 0 else f"key-{k}"
                value = None if (r == rounds - 2 and k % 5 == 1) else f"v{r}-{k}".encode()
                producer.produce(topic, key=key.encode(), value=value, partition=p,
                                 timestamp=BASE_TS + r * 10_000 + k)
        produce_and_wait(producer)
        time.sleep(0.25)  # let segment.ms roll a new segment between rounds
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        holes = [p for p in range(partitions) if _has_holes(read_partition(clusters, "source", topic, p))]
        if len(holes) == partitions:
            break
        # a new record rolls the active segment so the cleaner can reach the previous ones
        for p in range(partitions):
            producer.produce(topic, key=b"roll", value=b"r", partition=p, timestamp=BASE_TS + 999_999)
        produce_and_wait(producer)
        time.sleep(1)
    else:
        raise AssertionError(f"{topic}: the log cleaner left no holes within 90 s")
    freeze_compaction(clusters, topic)


def _has_holes(records: list[Record]) -> bool:
    offsets = [r.offset for r in records]
    return any(b - a > 1 for a, b in zip(offsets, offsets[1:], strict=False))


def freeze_compaction(clusters, topic: str) -> None:
    """Stop the cleaner from changing the source while the test compares it with the destination."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entry = ConfigEntry("min.compaction.lag.ms", str(10**12), incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    for future in clusters.admin("source").incremental_alter_configs([resource]).values():
        future.result(30)
    time.sleep(2)  # a cleaning pass already running finishes


COMPACTED_CONFIG = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
                    "delete.retention.ms": "0", "min.compaction.lag.ms": "0"}


def copy_in_process(plan_path: str, configs_env: str, fault: str | None = None) -> subprocess.CompletedProcess:
    """The copy job without Spark, in a child process (a fault kills the child, not pytest)."""
    env = {**os.environ, "KFERRY_CLUSTER_CONFIGS": configs_env}
    env.pop("KFERRY_FAULT", None)
    if fault:
        env["KFERRY_FAULT"] = fault
    cmd = [sys.executable, str(REPO / "spark_jobs" / "copy_batch.py"), "--plan", plan_path, "--in-process"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def plan_and_copy_in_process(spec_path: str, configs_env: str) -> dict:
    """plan_copy, then the copy job without Spark; returns the JSON report."""
    from kafka_ferry.operators.copy import PlanCopyBatchOperator

    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})
    done = copy_in_process(plan["plan_path"], configs_env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(Path(plan["report_path"]).read_text())


def seed_acceptance_topics(clusters, prefix: str) -> list[tuple[str, int]]:
    """A plain topic (3 partitions), a compacted one with holes (2) and a transactional one with aborts (2)."""
    plain = clusters.create_topic("source", f"{prefix}.plain", 3)
    compacted = clusters.create_topic("source", f"{prefix}.compacted", 2, COMPACTED_CONFIG)
    txn = clusters.create_topic("source", f"{prefix}.txn", 2)
    seed_plain(clusters, plain, 3, 200)
    seed_transactional(clusters, txn, 2, rounds=7)
    seed_compacted_with_holes(clusters, compacted, 2)
    return [(plain, 3), (compacted, 2), (txn, 2)]
