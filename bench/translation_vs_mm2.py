"""kafka-ferry's exact translation vs MirrorMaker 2's on the same source data and the same stopped groups.

    .venv/bin/python bench/translation_vs_mm2.py [--groups 30]

Seeds a plain, a compacted (with holes) and a transactional (with aborts) topic, every record tagged with
a unique id header; commits groups at random positions; then
  (a) kafka-ferry: copies (the copier, in process) and translates (exact, from our sync log);
  (b) MirrorMaker 2 (dedicated mode, connect-mirror from the test bed's jars, DefaultReplicationPolicy so
      its topics are ``<alias>.<topic>`` and never touch ours) copies and emits checkpoints.
For each group and partition, what a consumer resuming at the translated offset would receive is mapped
back to source offsets through the id header and compared with what it had not consumed yet:
duplicates (re-delivered), missing (skipped), untranslated partitions. Prints JSON. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

import yaml
from _common import REPO, tb
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

SOURCE_CONN, DESTINATION_CONN = "kf_bench_source", "kf_bench_destination"
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "200",
           "min.cleanable.dirty.ratio": "0.001", "min.compaction.lag.ms": "0", "delete.retention.ms": "100"}
PARTITIONS = 2


def connections() -> None:
    for conn_id, bootstrap in ((SOURCE_CONN, tb.SOURCE.bootstrap), (DESTINATION_CONN, tb.DESTINATION.bootstrap)):
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}})


def seed(prefix: str, records: int, rng: random.Random) -> list[str]:
    admin = AdminClient({"bootstrap.servers": tb.SOURCE.bootstrap})
    topics = {f"{prefix}.plain": {}, f"{prefix}.compact": COMPACT, f"{prefix}.txn": {}}
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1, config=c) for t, c in topics.items()]).values():
        f.result(60)
    plain = Producer({"bootstrap.servers": tb.SOURCE.bootstrap, "batch.size": 1024, "linger.ms": 0})
    seq = iter(range(10**9))

    def send(producer, topic, p, key, value):
        producer.produce(topic, key=key, value=value, partition=p, headers=[("id", str(next(seq)).encode())])

    for p in range(PARTITIONS):
        for i in range(records):
            send(plain, f"{prefix}.plain", p, f"k{i}".encode(), b"v" * 50)
            send(plain, f"{prefix}.compact", p, f"key{i % 9}".encode(), None if i % 13 == 12 else b"c" * 200)
    assert plain.flush(60) == 0
    txn = Producer({"bootstrap.servers": tb.SOURCE.bootstrap, "transactional.id": f"{prefix}-txn"})
    txn.init_transactions(30)
    for t in range(records // 4):
        txn.begin_transaction()
        for _ in range(rng.randint(1, 6)):
            send(txn, f"{prefix}.txn", rng.randrange(PARTITIONS), b"t", b"x" * 50)
        txn.flush(30)
        txn.abort_transaction(30) if t % 3 == 1 else txn.commit_transaction(30)
        if rng.random() < 0.4:
            send(plain, f"{prefix}.txn", rng.randrange(PARTITIONS), b"p", b"y")
            plain.flush(30)
    for _ in range(30):  # let the cleaner punch holes into the compacted topic
        send(plain, f"{prefix}.compact", 0, b"roll", b"r")
        send(plain, f"{prefix}.compact", 1, b"roll", b"r")
        plain.flush(30)
        time.sleep(0.5)
    return list(topics)


def read_ids(bootstrap: str, topic: str) -> dict[int, list[tuple[int, str]]]:
    """(offset, id header) of every committed record, per partition, to the end."""
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.kafka.reads import read_whole_partitions

    hook = kafka_cluster(SOURCE_CONN if bootstrap == tb.SOURCE.bootstrap else DESTINATION_CONN)
    out: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for msg in read_whole_partitions(hook, [(topic, p) for p in range(PARTITIONS)]):
        out[msg.partition()].append((msg.offset(), dict(msg.headers() or [])["id"].decode()))
    return out


def outcome(source_ids, dest_ids, upstream: int, downstream: int | None) -> dict:
    """What a consumer resuming at ``downstream`` gets, vs the source records at or after ``upstream``."""
    if downstream is None:
        return {"translated": False}
    wanted = [i for o, i in source_ids if o >= upstream]
    got = [i for o, i in dest_ids if o >= downstream]
    consumed = {i for o, i in source_ids if o < upstream}
    return {"translated": True, "duplicates": sum(1 for i in got if i in consumed),
            "missing": len(set(wanted) - set(got))}


def run_mm2(prefix: str, work: Path, timeout_s: float, expected: dict) -> tuple[dict, float]:
    """Run MM2 until its topics hold every record and its checkpoints stop changing; returns them."""
    from kafka_ferry.core.offsets.mm2_wire import Checkpoint

    a, b = f"a{uuid.uuid4().hex[:6]}", f"b{uuid.uuid4().hex[:6]}"
    props = {
        "clusters": f"{a},{b}", f"{a}.bootstrap.servers": tb.SOURCE.bootstrap,
        f"{b}.bootstrap.servers": tb.DESTINATION.bootstrap, f"{a}->{b}.enabled": "true",
        f"{b}->{a}.enabled": "false", f"{a}->{b}.topics": f"{prefix}\\..*", f"{a}->{b}.groups": f"{prefix}-.*",
        "tasks.max": "1", "emit.heartbeats.enabled": "false", "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.enabled": "false", "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2", "sync.topic.acls.enabled": "false",
        "sync.topic.configs.enabled": "false",  # Kafka 4 rejects the source's tiny test segment.bytes
        "config.properties.exclude":
            "segment.bytes,segment.ms,min.cleanable.dirty.ratio,delete.retention.ms",
        "offset.flush.interval.ms": "1000",
        "replication.factor": "1", "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1"}
    (work / "mm2.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    (work / "log4j2.properties").write_text(
        f"appender.f.type=File\nappender.f.name=f\nappender.f.fileName={work}/mm2.log\n"
        "appender.f.layout.type=PatternLayout\nappender.f.layout.pattern=%d %p %m (%c)%n\n"
        "rootLogger.level=INFO\nrootLogger.appenderRef.f.ref=f\n")
    cp = subprocess.run(["python3", str(REPO / "testbed" / "kafka_testbed.py"), "classpath"],
                        capture_output=True, text=True, check=True).stdout.strip()
    started = time.monotonic()
    proc = subprocess.Popen(["java", "-Xmx384m", f"-Dlog4j2.configurationFile={work}/log4j2.properties", "-cp", cp,
                             "org.apache.kafka.connect.mirror.MirrorMaker", str(work / "mm2.properties")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    consumer = Consumer({"bootstrap.servers": tb.DESTINATION.bootstrap, "group.id": f"{a}-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(f"{a}.checkpoints.internal", 0, 0)])
    checkpoints, last_change = {}, time.monotonic()
    try:
        while time.monotonic() - started < timeout_s:
            for msg in consumer.consume(500, 1.0):
                if msg.error() or msg.value() is None:
                    continue
                cp_ = Checkpoint.from_record(msg.key(), msg.value())
                key = (cp_.consumer_group, cp_.topic, cp_.partition)
                if checkpoints.get(key) != cp_:
                    checkpoints[key], last_change = cp_, time.monotonic()
            if len(checkpoints) >= expected["group_partitions"] and time.monotonic() - last_change > 8:
                break
            if checkpoints and time.monotonic() - last_change > 45:  # MM2 translates nothing for the rest
                break
        copied_s = time.monotonic() - started
    finally:
        consumer.close()
        proc.terminate()
        proc.wait(30)
    return {"alias": a, "checkpoints": checkpoints}, copied_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=30)
    parser.add_argument("--records", type=int, default=400, help="records per partition of each topic")
    parser.add_argument("--mm2-timeout", type=float, default=240)
    args = parser.parse_args()
    connections()
    from kafka_ferry.core.specs.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.operators.provision import ProvisionMirrorGroupsOperator, ProvisionMirrorTopicsOperator
    from kafka_ferry.promotion.steps import in_process_final_copy
    from kafka_ferry.state.store import MigrationStateStore
    from kafka_ferry.translation.translate import translate_migration

    rng = random.Random(4)
    prefix = f"cmp-{uuid.uuid4().hex[:6]}"
    work = Path(tempfile.mkdtemp(prefix="mm2cmp-"))
    topics = seed(prefix, args.records, rng)
    source_ids = {t: read_ids(tb.SOURCE.bootstrap, t) for t in topics}
    ends = {t: {p: (source_ids[t][p][-1][0] + 1 if source_ids[t][p] else 0) for p in range(PARTITIONS)}
            for t in topics}
    positions = {}
    for g in range(args.groups):
        topic = topics[g % len(topics)]
        positions[f"{prefix}-g{g}"] = {(topic, p): rng.randint(0, ends[topic][p]) for p in range(PARTITIONS)}
        c = Consumer({"bootstrap.servers": tb.SOURCE.bootstrap, "group.id": f"{prefix}-g{g}"})
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in positions[f"{prefix}-g{g}"].items()],
                 asynchronous=False)
        c.close()

    spec_path = work / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({
        "name": prefix, "tenant": "bench", "source": {"connection_id": SOURCE_CONN, "alias": "src"},
        "destination": {"connection_id": DESTINATION_CONN, "alias": "dst"},
        "topics": {"include": [f"{prefix}\\..*"]}, "groups": {"include": [f"{prefix}-.*"]}}))
    spec = load_spec(spec_path)
    source, destination = kafka_cluster(SOURCE_CONN), kafka_cluster(DESTINATION_CONN)
    ProvisionMirrorTopicsOperator(task_id="t", spec_path=str(spec_path)).execute({})
    ProvisionMirrorGroupsOperator(task_id="g", spec_path=str(spec_path)).execute({})
    t0 = time.monotonic()
    store = MigrationStateStore(destination, spec.state_topic_name)
    in_process_final_copy(spec, source, destination, store)
    ours = {(d.group, d.source_topic, d.partition): d.downstream_offset
            for d in translate_migration(spec, source, destination, store).decisions}
    ferry_s = time.monotonic() - t0

    mm2, mm2_s = run_mm2(prefix, work, args.mm2_timeout, {"group_partitions": len(positions) * PARTITIONS})
    results = {"kafka-ferry": defaultdict(list), "mm2": defaultdict(list)}
    for tool, dest_of in (("kafka-ferry", lambda t: t), ("mm2", lambda t: f"{mm2['alias']}.{t}")):
        dest_ids = {t: read_ids(tb.DESTINATION.bootstrap, dest_of(t)) for t in topics}
        for group, offsets in positions.items():
            for (topic, p), upstream in offsets.items():
                if tool == "kafka-ferry":
                    down = ours.get((group, topic, p))
                else:
                    cp_ = mm2["checkpoints"].get((group, dest_of(topic), p))
                    down = cp_.downstream_offset if cp_ else None
                row = outcome(source_ids[topic][p], dest_ids[topic][p], upstream, down)
                results[tool][group].append({**row, "kind": topic.rsplit(".", 1)[1]})
    summary = {}
    for tool, per_group in results.items():
        rows = [r for rs in per_group.values() for r in rs]
        translated = [r for r in rows if r["translated"]]
        summary[tool] = {
            "group_partitions": len(rows), "translated": len(translated),
            "groups_fully_translated": sum(all(r["translated"] for r in rs) for rs in per_group.values()),
            "groups_with_duplicates": sum(any(r.get("duplicates") for r in rs) for rs in per_group.values()),
            "duplicates_total": sum(r["duplicates"] for r in translated),
            "duplicates_max_per_partition": max((r["duplicates"] for r in translated), default=0),
            "missing_total": sum(r["missing"] for r in translated),
            "translated_by_kind": {k: f"{sum(r['translated'] for r in rows if r['kind'] == k)}/"
                                      f"{sum(r['kind'] == k for r in rows)}" for k in ("plain", "compact", "txn")},
            "duplicates_by_kind": {k: sum(r.get("duplicates", 0) for r in rows if r["kind"] == k)
                                   for k in ("plain", "compact", "txn")}}
    print(json.dumps({"groups": len(positions), "topics": topics, "records_per_partition": args.records,
                      "kafka_ferry_copy_and_translate_s": round(ferry_s, 1),
                      "mm2_run_s": round(mm2_s, 1), **summary}, indent=1))


if __name__ == "__main__":
    main()
