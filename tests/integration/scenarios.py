"""The integration tests' one fixture library, on top of the session's ``clusters`` (or ``private``) fixture.

- **Specs**: ``write_spec`` writes a migration spec for the topics ``<prefix>.*`` and groups ``<prefix>-*``.
- **Seeders**, one per kind of source topic: ``seed_plain`` (keys, tombstones, repeated and empty headers, explicit
  CreateTimes), ``seed_transactional`` (committed and aborted transactions with plain records between, ending on
  an abort), ``seed_compacted`` (holes punched by the real log cleaner, then frozen). ``seed_acceptance_topics``
  makes one of each.
- **Running the migration** the way the DAG does: ``provision``, ``provision_groups``, ``run_batch`` (plan, Spark,
  report), ``catch_up_run`` (every task of a scheduled run, pre-flight to translation), ``spark_submit`` /
  ``copy_in_process`` (the job itself, for its exit code), ``one_group_migration``.
- **Reading back**: ``read_partition``, ``committed_offsets``, ``destination_provenance``, ``consume_as_group``,
  ``read_syncs``; a group's consumer reading on (``consume_some``, ``remaining``, ``read_on_as_group``, rollback
  tests); and the checks ``assert_copied_exactly_once``, ``assert_syncs_exact``, ``check_all``; ``snapshot`` of
  everything a test has on both clusters (a refusal or a dry run compares it before and after).

Imported by the test modules (pytest puts this folder on sys.path); clients come from the cluster fixture, never
from configs built here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import TopicPartition

from kafka_ferry.core.offsets.mm2_wire import HEARTBEATS_TOPIC, Heartbeat, OffsetSync, offset_syncs_topic
from kafka_ferry.core.offsets.offset_translation import translate_exact
from kafka_ferry.core.offsets.provenance import read_provenance, user_headers
from kafka_ferry.kafka.acls import describe_acls
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.kafka.reads import consumed_headers, consumed_partition
from kafka_ferry.operators.copy import CopyBatchSparkOperator, CopyReportOperator, PlanCopyBatchOperator
from kafka_ferry.operators.provision import ProvisionMirrorGroupsOperator, ProvisionMirrorTopicsOperator

REPO = Path(__file__).resolve().parents[2]

# Explicit CreateTimes an hour back: distinct from append time (a lost timestamp shows), young enough for the
# topics' 7-day time retention.
BASE_TS = (int(time.time()) - 3600) * 1000

# Small segments rolled fast and cleaned at once, so the cleaner punches holes within seconds.
COMPACT_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "100",
                  "min.cleanable.dirty.ratio": "0.001", "min.compaction.lag.ms": "0", "delete.retention.ms": "0"}


# --- specs --------------------------------------------------------------------------------------------------------

def write_spec(tmp_path, clusters, prefix: str, copy: dict | None = None, **sections) -> str:
    """A spec migrating ``<prefix>.*`` (but ``<prefix>.skip``) and groups ``<prefix>-*``; returns its path.

    ``copy`` is merged into the copy section; any other keyword replaces its whole section. The destination
    alias is the prefix's own, so each test has its own offset-syncs topic.
    """
    doc = {
        "name": prefix.lower(),
        "tenant": "test",
        "source": {"connection_id": clusters.SOURCE_CONN, "alias": "src"},
        "destination": {"connection_id": clusters.DESTINATION_CONN, "alias": f"dst-{prefix}"},
        "topics": {"include": [f"{prefix}\\..*"], "exclude": [f"{prefix}\\.skip"]},
        # many scenarios migrate topics only: no group of theirs is the pre-flight's "matched nothing" typo
        "groups": {"include": [f"{prefix}-.*"], "allow_empty": True},
        "copy": {"spark_connection_id": clusters.SPARK_CONN, "offset_sync_interval": 7, **(copy or {})},
        "promotion": {"quiesce_window_seconds": 2, "poke_interval_seconds": 1},
        **sections,
    }
    path = tmp_path / f"{prefix}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


# --- seeders ------------------------------------------------------------------------------------------------------

class _CheckedProducer:
    """A source producer whose flush() fails the test on any undelivered record."""

    def __init__(self, clusters, **config):
        self._producer = clusters.producer("source", **config)
        self.errors: list = []

    def produce(self, *args, **kwargs):
        self._producer.produce(*args, on_delivery=self._on_delivery, **kwargs)

    def _on_delivery(self, err, _msg):
        if err is not None:
            self.errors.append(err)

    def flush(self, timeout=30):
        assert self._producer.flush(timeout) == 0 and not self.errors, self.errors[:3]

    def __getattr__(self, name):
        return getattr(self._producer, name)


def seed_plain(clusters, topic: str, partitions: int, per_partition: int, start: int = 0) -> None:
    """Keys (some null), values (some tombstones), headers (repeated names, null values) and explicit CreateTimes."""
    producer = _CheckedProducer(clusters)
    for p in range(partitions):
        for i in range(start, start + per_partition):
            headers: list[tuple[str, bytes | None]] | None = (
                [("h", f"{p}-{i}".encode()), ("h", b"second")] if i % 3 == 0 else None)
            if i % 7 == 0:
                headers = [("empty", None), ("bin", bytes([0, 255, i % 256]))]
            value = None if i % 11 == 5 else f"value-{p}-{i}".encode() * (1 + i % 4)
            producer.produce(topic, key=f"k{i % 50}".encode() if i % 13 else None, value=value, partition=p,
                             timestamp=BASE_TS + i * 1000 + p, headers=headers)
    producer.flush(30)


def seed_transactional(clusters, topic: str, partitions: int, rounds: int, per_txn: int = 5,
                       transactional_id: str | None = None, plain_between: bool = False) -> None:
    """``rounds`` transactions over every partition, every third one and the last aborted; the log ends with
    trailing markers. ``plain_between``: a non-transactional record after each round but the last, so committed
    plain records sit between aborted ones."""
    txn = _CheckedProducer(clusters, **{"transactional.id": transactional_id or f"{topic}-txn"})
    plain = _CheckedProducer(clusters)
    txn.init_transactions(30)
    for r in range(rounds):
        txn.begin_transaction()
        aborted = r % 3 == 1 or r == rounds - 1
        for p in range(partitions):
            for i in range(per_txn):
                value = f"{'abort' if aborted else 'commit'}-{r}-{p}-{i}".encode()
                txn.produce(topic, key=f"t{r}-{i}".encode(), value=value, partition=p,
                            timestamp=BASE_TS + r * 100 + i, headers=[("round", str(r).encode())])
        txn.flush(30)  # aborted records must really reach the log, not be purged from the queue
        if aborted:
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
        if plain_between and r < rounds - 1:
            plain.produce(topic, key=b"p", value=f"plain-{r}".encode(), partition=r % partitions,
                          timestamp=BASE_TS + r * 100 + 99)
            plain.flush(30)


def seed_compacted(clusters, topic: str, partitions: int, per_partition: int, timeout_s: float = 90,
                   timestamp_of=None, key_of=None) -> None:
    """Rewritten keys and tombstones on small segments; waits until the cleaner left holes between surviving
    records in every partition and stopped changing the log, then freezes it (``freeze_compaction``).

    The topic must be created with ``COMPACT_CONFIG``. ``key_of(i)`` gives the keys (default: every fourth key
    unique, so it survives between the rewritten ones); ``timestamp_of(partition, i)`` the CreateTimes (default
    one second apart from ``BASE_TS``).
    """
    key_of = key_of or (lambda i: f"once{i}" if i % 4 == 0 else f"key{i % 6}")
    timestamp_of = timestamp_of or (lambda p, i: BASE_TS + i * 1000 + p)
    producer = _CheckedProducer(clusters, **{"batch.size": 1024, "linger.ms": 0})
    for p in range(partitions):
        for i in range(per_partition):
            value = None if i % 11 == 10 else (f"c{p}-{i}-" + "x" * 200).encode()
            producer.produce(topic, key=key_of(i).encode(), value=value, partition=p, timestamp=timestamp_of(p, i))
    producer.flush(30)
    deadline = time.monotonic() + timeout_s
    counts = None
    while time.monotonic() < deadline:
        time.sleep(1)
        for p in range(partitions):  # a new record rolls the active segment, so the cleaner reaches the others
            producer.produce(topic, key=b"roll", value=b"r", partition=p)
        producer.flush(30)
        offsets = committed_offsets(clusters, "source", topic, partitions)
        if all(_has_holes(offsets[p]) for p in range(partitions)):
            counts = {p: len(o) for p, o in offsets.items()}
            break
    else:
        raise AssertionError(f"{topic}: the log cleaner left no holes within {timeout_s} s")
    while time.monotonic() < deadline:  # the cleaner may still be folding the last rolled segments
        time.sleep(1.5)
        again = count_committed(clusters, "source", topic, partitions)
        if again == counts:
            freeze_compaction(clusters, topic)
            return
        counts = again
    raise AssertionError(f"{topic} kept changing under the log cleaner")


def _has_holes(offsets: list[int]) -> bool:
    return any(b - a > 1 for a, b in zip(offsets, offsets[1:], strict=False))


def freeze_compaction(clusters, topic: str) -> None:
    """Stop the cleaner from changing the source while the test compares it with the destination."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entry = ConfigEntry("min.compaction.lag.ms", str(10**12), incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    for future in clusters.admin("source").incremental_alter_configs([resource]).values():
        future.result(30)
    time.sleep(2)  # a cleaning pass already running finishes


def seed_acceptance_topics(clusters, prefix: str) -> list[tuple[str, int]]:
    """A plain topic (3 partitions), a compacted one with holes (2) and a transactional one with aborts (2)."""
    plain = clusters.create_topic("source", f"{prefix}.plain", 3)
    compacted = clusters.create_topic("source", f"{prefix}.compacted", 2, COMPACT_CONFIG)
    txn = clusters.create_topic("source", f"{prefix}.txn", 2)
    seed_plain(clusters, plain, 3, 200)
    seed_transactional(clusters, txn, 2, rounds=7)
    seed_compacted(clusters, compacted, 2, 120)
    return [(plain, 3), (compacted, 2), (txn, 2)]


def commit_source_group(clusters, group: str, offsets: dict[tuple[str, int], int], metadata: str = "") -> None:
    consumer = clusters.consumer("source", group)
    # metadata only when there is some: TopicPartition refuses a None one
    consumer.commit(offsets=[TopicPartition(t, p, o, metadata) if metadata else TopicPartition(t, p, o)
                             for (t, p), o in offsets.items()],
                    asynchronous=False)
    consumer.close()


# --- running the migration ----------------------------------------------------------------------------------------

def provision(spec_path: str, dry_run: bool = False) -> dict:
    return ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=spec_path, dry_run=dry_run).execute({})


def provision_groups(spec_path: str) -> dict:
    return ProvisionMirrorGroupsOperator(task_id="provision_groups", spec_path=spec_path).execute({})


def one_group_migration(clusters, tmp_path, prefix: str, partitions: int, per_partition: int,
                        group_offsets: dict[int, int], metadata: str = "", seeded_partitions: int | None = None):
    """A provisioned migration of one plain topic and one source group `<p>-g` at the given offsets.

    Returns (p, topic, spec_path, spec). `seeded_partitions` leaves the higher partitions empty.
    """
    from kafka_ferry.core.specs.spec import load_spec

    p = clusters.unique(prefix)
    topic = clusters.create_topic("source", f"{p}.t", partitions)
    seed_plain(clusters, topic, partitions if seeded_partitions is None else seeded_partitions, per_partition)
    spec_path = write_spec(tmp_path, clusters, p)
    commit_source_group(clusters, f"{p}-g", {(topic, q): o for q, o in group_offsets.items()}, metadata=metadata)
    provision(spec_path)
    provision_groups(spec_path)
    return p, topic, spec_path, load_spec(spec_path)


class _TaskInstance:
    """Test seam for the XCom hand-over between the DAG's tasks (the operators run for real)."""

    def __init__(self) -> None:
        self.xcom: dict[str, object] = {}

    def xcom_pull(self, task_ids: str):
        return self.xcom.get(task_ids)


def run_batch(spec_path: str, spark_conn: str, env: dict | None = None, conf: dict | None = None) -> dict:
    """plan_copy >> copy_batch >> report, as in the DAG; returns the full JSON report the report task read.
    ``conf``: the copy task's own Spark conf (a deployment's)."""
    ti = _TaskInstance()
    context = {"ti": ti}
    ti.xcom["plan_copy"] = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute(context)
    copy = CopyBatchSparkOperator(task_id="copy_batch", spec_path=spec_path, conn_id=spark_conn,
                                  env_vars={"PYSPARK_PYTHON": sys.executable, **(env or {})}, conf=conf)
    try:
        copy.execute(context)
    except Exception as exc:  # noqa: BLE001 - Airflow's skip is a control-flow exception
        if type(exc).__name__ != "AirflowSkipException":
            raise
    summary = CopyReportOperator(task_id="report", spec_path=spec_path).execute(context)
    from kafka_ferry.storage.workdir import as_path, read_text

    return json.loads(read_text(as_path(summary["report_path"])))  # a local file or the work dir's object store


def catch_up_run(spec_path: str, spark_conn: str) -> dict:
    """One scheduled catch-up run, task by task as the DAG runs them: preflight -> provision_topics ->
    provision_groups -> plan_copy -> copy_batch -> report -> translate_offsets; returns the batch's report."""
    from kafka_ferry.operators.provision import MigrationPreflightOperator
    from kafka_ferry.operators.translation import TranslateOffsetsOperator

    MigrationPreflightOperator(task_id="preflight", spec_path=spec_path).execute({})
    provision(spec_path)
    provision_groups(spec_path)
    report = run_batch(spec_path, spark_conn)
    TranslateOffsetsOperator(task_id="translate_offsets", spec_path=spec_path).execute({})
    return report


def spark_submit(plan_path: str, configs_env: str, master: str = "local[2]", fault: str | None = None,
                 timeout: float = 300) -> subprocess.CompletedProcess:
    """spark-submit copy_batch.py directly (the crash tests need its exit code and stderr)."""
    from kafka_ferry.copy.packaging import build_package_zip

    package = build_package_zip(Path(plan_path).parent / "packages")
    env = _job_env(configs_env, fault)
    env["PYSPARK_PYTHON"] = sys.executable
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", master, "--py-files", str(package),
           str(REPO / "spark_jobs" / "copy_batch.py"), "--plan", plan_path]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def copy_in_process(plan_path: str, configs_env: str, fault: str | None = None) -> subprocess.CompletedProcess:
    """The copy job without Spark, in a child process (a fault kills the child, not pytest)."""
    cmd = [sys.executable, str(REPO / "spark_jobs" / "copy_batch.py"), "--plan", plan_path, "--in-process"]
    return subprocess.run(cmd, env=_job_env(configs_env, fault), capture_output=True, text=True, timeout=300)


def _job_env(configs_env: str, fault: str | None) -> dict:
    env = {**os.environ, "KFERRY_CLUSTER_CONFIGS": configs_env}
    env.pop("KFERRY_FAULT", None)
    if fault:
        env["KFERRY_FAULT"] = fault
    return env


def plan_and_copy_in_process(spec_path: str, configs_env: str) -> dict:
    """plan_copy, then the copy job without Spark; returns the JSON report."""
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})
    done = copy_in_process(plan["plan_path"], configs_env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(Path(plan["report_path"]).read_text())


# --- reading back -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int


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
        deadline, at = time.monotonic() + 60, start
        while time.monotonic() < deadline:
            # Why ask for no more than the offsets left: consume() returns once it has that many, where asking for
            # 500 waits out its whole timeout on every partition of fewer (0.5 s each, ~2 s per snapshot); offsets
            # that deliver nothing (transaction markers, aborted records) only make it wait that timeout once.
            for msg in consumer.consume(max(1, min(500, end - at)), 0.5):
                assert msg.error() is None, msg.error()
                at = msg.offset() + 1
                if msg.offset() < end:
                    out.append(Record(msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                                      msg.timestamp()[1]))
            if consumer.position([TopicPartition(topic, partition)])[0].offset >= end:
                return out
        raise AssertionError(f"{side} {topic}-{partition} not read to {end} in 60 s")
    finally:
        consumer.close()


def count_committed(clusters, side, topic, partitions) -> dict[int, int]:
    return {p: len(offsets) for p, offsets in committed_offsets(clusters, side, topic, partitions).items()}


def _where(msg) -> tuple[int, int]:
    """A consumed record's partition and offset (a record, unlike an error event, has both)."""
    offset = msg.offset()
    assert offset is not None
    return consumed_partition(msg)[1], offset


def committed_offsets(clusters, side, topic, partitions) -> dict[int, list[int]]:
    """Offsets of the committed records of each partition (read_committed, to the LSO)."""
    from kafka_ferry.kafka.reads import read_whole_partitions

    out: dict[int, list[int]] = {p: [] for p in range(partitions)}
    for msg in read_whole_partitions(clusters.cluster(side), [(topic, p) for p in range(partitions)]):
        q, offset = _where(msg)
        out[q].append(offset)
    for offsets in out.values():
        offsets.sort()
    return out


def destination_provenance(clusters, topic, partitions) -> dict[int, list[tuple[int, int | None]]]:
    """(destination offset, source offset from provenance) of every committed destination record."""
    from kafka_ferry.kafka.reads import read_whole_partitions

    out: dict[int, list[tuple[int, int | None]]] = {p: [] for p in range(partitions)}  # None: no provenance
    for msg in read_whole_partitions(clusters.cluster("destination"), [(topic, p) for p in range(partitions)]):
        q, offset = _where(msg)
        out[q].append((offset, read_provenance(consumed_headers(msg))[1]))
    return out


def consume_as_group(clusters, group: str, topic: str, partitions: int) -> dict[int, list[int | None]]:
    """Consume the destination from the group's committed offsets to the end; source offsets per partition."""
    from kafka_ferry.kafka.reads import read_ranges

    hook = clusters.cluster("destination")
    parts = [(topic, p) for p in range(partitions)]
    committed = hook.group_offsets(group)
    ends = hook.list_offsets(parts)
    ranges = {tp: (committed[tp], ends[tp]) for tp in parts if tp in committed}
    # a record without provenance (not copied: written on the destination) gives None
    out: dict[int, list[int | None]] = {p: [] for p in range(partitions) if (topic, p) in committed}
    for msg in read_ranges(hook, ranges):
        out[consumed_partition(msg)[1]].append(read_provenance(consumed_headers(msg))[1])
    return out


# --- consumer groups reading on (rollback tests) ---------------------------------------------------------------

def shape(rec) -> tuple:
    return rec.key, rec.value, tuple(user_headers(rec.headers)), rec.timestamp


def consume_some(clusters, side, group, topic, per_partition) -> None:
    """A consumer of ``group`` reads ``per_partition[q]`` records of each partition from its committed offset (all
    of them for None) and commits where it stopped."""
    hook = clusters.cluster(side)
    committed = hook.group_offsets(group)
    for q, n in per_partition.items():
        tp = (topic, q)
        end = hook.list_offsets([tp], "latest")[tp]
        start = committed.get(tp, 0)
        consumer = clusters.consumer(side, group, **{"isolation.level": "read_committed"})
        consumer.assign([TopicPartition(topic, q, start)])
        position, read = start, 0
        while position < end and (n is None or read < n):
            for msg in consumer.consume(1, 1.0):
                assert msg.error() is None, msg.error()
                position, read = msg.offset() + 1, read + 1
            position = max(position, consumer.position([TopicPartition(topic, q)])[0].offset)
        consumer.commit(offsets=[TopicPartition(topic, q, position)], asynchronous=False)
        consumer.close()


def consume_some_subscribed(clusters, side, group, topic, per_partition) -> None:
    """``consume_some`` as a member of the group (subscribe, with whatever ``group.protocol`` the pair's consumers
    use): reads ``per_partition[q]`` records of each partition from the committed offset (all for None), commits
    where it stopped, leaves the group."""
    hook = clusters.cluster(side)
    ends = hook.list_offsets([(topic, q) for q in per_partition], "latest")
    committed = hook.group_offsets(group)
    consumer = clusters.consumer(side, group, **{"isolation.level": "read_committed"})
    read = dict.fromkeys(per_partition, 0)
    stop = {q: committed[(topic, q)] for q, n in per_partition.items()  # read to the end already
            if n is None and committed.get((topic, q), -1) >= ends[(topic, q)]}
    deadline = time.monotonic() + 120
    try:
        consumer.subscribe([topic])
        while len(stop) < len(per_partition):
            assert time.monotonic() < deadline, f"group {group} read {read} of {topic}, not {per_partition}, in 120 s"
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                q = msg.partition()
                if q in stop or q not in per_partition:
                    continue  # past where this member stops, or not its to read: neither counted nor committed
                read[q] += 1
                if per_partition[q] is not None and read[q] >= per_partition[q]:
                    stop[q] = msg.offset() + 1
            for tp in consumer.assignment():
                q = tp.partition
                if q in per_partition and q not in stop and per_partition[q] is None:
                    at = consumer.position([tp])[0].offset
                    if at >= ends[(topic, q)]:
                        stop[q] = at
        consumer.commit(offsets=[TopicPartition(topic, q, o) for q, o in sorted(stop.items())], asynchronous=False)
    finally:
        consumer.close()


def remaining(clusters, side, group, topic) -> dict[int, list[tuple]]:
    """What ``group`` has not read yet, per partition: the committed records from its committed offset on."""
    committed = clusters.cluster(side).group_offsets(group)
    return {q: [shape(r) for r in read_partition(clusters, side, topic, q) if r.offset >= committed[(topic, q)]]
            for q in range(2)}


def read_on_as_group(clusters, group, topic, side="source") -> dict[int, list[tuple]]:
    """A real consumer of ``group`` subscribed on ``side`` reads to the end; what it got, per partition."""
    hook = clusters.cluster(side)
    ends = hook.list_offsets([(topic, q) for q in range(2)], "latest")
    consumer = clusters.consumer(side, group, **{"isolation.level": "read_committed",
                                                     "auto.offset.reset": "error"})
    consumer.subscribe([topic])
    got: dict[int, list[tuple]] = {0: [], 1: []}
    done: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while len(done) < 2:
            assert time.monotonic() < deadline, f"group {group} did not read {topic} to its end"
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                got[msg.partition()].append((msg.key(), msg.value(), tuple(user_headers(msg.headers() or ())),
                                             msg.timestamp()[1]))
            for tp in consumer.assignment():
                if consumer.position([tp])[0].offset >= ends[(tp.topic, tp.partition)] >= 0:
                    done.add(tp.partition)
            for q in range(2):
                if ends[(topic, q)] == hook.group_offsets(group).get((topic, q), -1):
                    done.add(q)
    finally:
        consumer.close()
    return got


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
    """Every topic copied exactly once and its syncs exact; returns how many records were checked."""
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


def snapshot(clusters, p: str) -> dict:
    """Everything of this test on both clusters: the topics named with ``p`` (mirrors, state, MM2 topics) with
    configs, log bounds and records; groups named with ``p`` and their offsets; ACLs; heartbeats of its flow."""
    from kafka_ferry.kafka.reads import read_whole_partitions

    out: dict[str, Any] = {}
    for side in ("source", "destination"):
        cluster = clusters.cluster(side)
        infos = cluster.describe_topics(t for t in cluster.list_topic_names() if p in t)
        partitions = [(t, q) for t, info in infos.items() for q in range(info.partitions)]
        try:
            acls = [str(a) for a in describe_acls(cluster)]
        except KafkaClusterError as exc:
            acls = [f"error {exc.code}"]  # the plain test bed has no authorizer: SECURITY_DISABLED both times
        out[side] = {
            "topics": {t: (i.partitions, i.replication_factor, dict(i.configs)) for t, i in infos.items()},
            "start": cluster.list_offsets(partitions, "earliest", read_committed=False),
            "end": cluster.list_offsets(partitions, "latest", read_committed=False),
            "records": {f"{t}-{q}": [(r.offset, r.key, r.value, r.headers) for r in
                                     read_partition(clusters, side, t, q)] for t, q in partitions},
            "groups": {g: cluster.group_offsets(g) for g in cluster.list_group_ids() if p in g},
            "acls": acls,
        }
    destination = clusters.cluster("destination")
    beats = destination.partitions_of([HEARTBEATS_TOPIC])
    out["heartbeats"] = sorted(
        (h.source_alias, h.target_alias, h.timestamp_ms) for h in
        (Heartbeat.from_record(m.key(), m.value()) for m in read_whole_partitions(destination, beats) if m.value())
        if p in h.source_alias or p in h.target_alias)
    return out

