"""Seeded source data for translation/promotion tests: plain, compacted (real holes) and transactional topics."""

from __future__ import annotations

import random
import time

import yaml
from confluent_kafka import TopicPartition

from kafka_ferry.core.provenance import read_provenance
from kafka_ferry.core.spec import load_spec
from kafka_ferry.operators.provision import ProvisionMirrorGroupsOperator, ProvisionMirrorTopicsOperator

COMPACT_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "200",
                  "min.cleanable.dirty.ratio": "0.001", "min.compaction.lag.ms": "0", "delete.retention.ms": "100"}


def write_spec(tmp_path, clusters, prefix: str, **overrides):
    doc = {
        "name": prefix.lower(),
        "tenant": "test",
        "source": {"connection_id": clusters.SOURCE_CONN, "alias": "src"},
        "destination": {"connection_id": clusters.DESTINATION_CONN, "alias": "dst"},
        "topics": {"include": [f"{prefix}\\..*"]},
        "groups": {"include": [f"{prefix}-.*"]},
        "copy": {"spark_connection_id": clusters.SPARK_CONN, "offset_sync_interval": 7},
        "promotion": {"quiesce_window_seconds": 2, "poke_interval_seconds": 1},
    }
    doc.update(overrides)
    path = tmp_path / f"{prefix}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path), load_spec(path)


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

    def flush(self, timeout):
        assert self._producer.flush(timeout) == 0 and not self.errors, self.errors[:3]

    def __getattr__(self, name):
        return getattr(self._producer, name)


def seed_plain(clusters, topic: str, partitions: int, per_partition: int) -> None:
    producer = _CheckedProducer(clusters)
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, key=f"k{i % 5}".encode(), value=f"v{p}-{i}".encode(), partition=p,
                             headers=[("h", f"{i}".encode())], timestamp=int(time.time() * 1000) - 60_000 + i)
    producer.flush(30)


def seed_compacted(clusters, topic: str, partitions: int, per_partition: int, timeout_s: float = 60,
                   timestamp_of=None, key_of=None) -> None:
    """Repeated keys and tombstones on small segments, then wait until the cleaner has punched holes.

    ``timestamp_of(partition, i)`` gives the records explicit CreateTimes (default: the producer's clock);
    ``key_of(i)`` their keys (default: six keys in turn, so only the last six records survive).
    """
    producer = _CheckedProducer(clusters, **{"batch.size": 1024, "linger.ms": 0})
    for p in range(partitions):
        for i in range(per_partition):
            value = None if i % 11 == 10 else (f"c{p}-{i}-" + "x" * 200).encode()
            extra = {"timestamp": timestamp_of(p, i)} if timestamp_of else {}
            key = key_of(i) if key_of else f"key{i % 6}"
            producer.produce(topic, key=key.encode(), value=value, partition=p, **extra)
    producer.flush(30)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(1)
        for p in range(partitions):  # keeps rolling the active segment
            producer.produce(topic, key=b"roll", value=b"r", partition=p)
        producer.flush(30)
        counts = count_committed(clusters, "source", topic, partitions)
        ends = clusters.cluster("source").list_offsets([(topic, p) for p in range(partitions)])
        if all(counts[p] < ends[(topic, p)] - 10 for p in range(partitions)):
            _wait_until_cleaned(clusters, topic, partitions, counts, deadline)
            return
    raise AssertionError(f"compaction made no holes in {topic} within {timeout_s} s")


def _wait_until_cleaned(clusters, topic, partitions, counts, deadline) -> None:
    """The cleaner may still be folding the last rolled segments: wait until two reads agree."""
    while time.monotonic() < deadline:
        time.sleep(1.5)
        again = count_committed(clusters, "source", topic, partitions)
        if again == counts:
            return
        counts = again
    raise AssertionError(f"{topic} kept changing under the log cleaner")


def seed_transactional(clusters, topic: str, partitions: int, transactions: int, seed: int = 7) -> None:
    """Committed and aborted transactions interleaved with plain records; ends on an aborted one."""
    rng = random.Random(seed)
    txn = _CheckedProducer(clusters, **{"transactional.id": clusters.unique("txn")})
    plain = _CheckedProducer(clusters)
    txn.init_transactions(30)
    for t in range(transactions):
        txn.begin_transaction()
        for i in range(rng.randint(1, 6)):
            txn.produce(topic, key=b"t", value=f"txn{t}-{i}".encode(), partition=rng.randrange(partitions))
        txn.flush(30)  # the aborted records must reach the log: they are the holes under test
        if t % 3 == 1 or t == transactions - 1:
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
        if rng.random() < 0.5:
            plain.produce(topic, value=f"plain{t}".encode(), partition=rng.randrange(partitions))
            plain.flush(30)


def count_committed(clusters, side, topic, partitions) -> dict[int, int]:
    return {p: len(offsets) for p, offsets in committed_offsets(clusters, side, topic, partitions).items()}


def committed_offsets(clusters, side, topic, partitions) -> dict[int, list[int]]:
    """Offsets of the committed records of each partition (read_committed, to the LSO)."""
    from kafka_ferry.kafka.reads import read_whole_partitions

    out: dict[int, list[int]] = {p: [] for p in range(partitions)}
    for msg in read_whole_partitions(clusters.cluster(side), [(topic, p) for p in range(partitions)]):
        out[msg.partition()].append(msg.offset())
    for offsets in out.values():
        offsets.sort()
    return out


def destination_provenance(clusters, topic, partitions) -> dict[int, list[tuple[int, int]]]:
    """(destination offset, source offset from provenance) of every committed destination record."""
    from kafka_ferry.kafka.reads import read_whole_partitions

    out: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
    for msg in read_whole_partitions(clusters.cluster("destination"), [(topic, p) for p in range(partitions)]):
        out[msg.partition()].append((msg.offset(), read_provenance(msg.headers())[1]))
    return out


def commit_source_group(clusters, group: str, offsets: dict[tuple[str, int], int], metadata: str = "") -> None:
    consumer = clusters.consumer("source", group)
    extra = {"metadata": metadata} if metadata else {}
    consumer.commit(offsets=[TopicPartition(t, p, o, **extra) for (t, p), o in offsets.items()],
                    asynchronous=False)
    consumer.close()


def consume_as_group(clusters, group: str, topic: str, partitions: int) -> dict[int, list[int]]:
    """Consume the destination from the group's committed offsets to the end; source offsets per partition."""
    from kafka_ferry.kafka.reads import read_ranges

    hook = clusters.cluster("destination")
    parts = [(topic, p) for p in range(partitions)]
    committed = hook.group_offsets(group)
    ends = hook.list_offsets(parts)
    ranges = {tp: (committed[tp], ends[tp]) for tp in parts if tp in committed}
    out: dict[int, list[int]] = {p: [] for p in range(partitions) if (topic, p) in committed}
    for msg in read_ranges(hook, ranges):
        out[msg.partition()].append(read_provenance(msg.headers())[1])
    return out


def provision(spec_path: str) -> None:
    ProvisionMirrorTopicsOperator(task_id="t", spec_path=spec_path).execute({})


def provision_groups(spec_path: str) -> dict:
    return ProvisionMirrorGroupsOperator(task_id="g", spec_path=spec_path).execute({})



def one_group_migration(clusters, tmp_path, prefix: str, partitions: int, per_partition: int,
                        group_offsets: dict[int, int], metadata: str = "", seeded_partitions: int | None = None):
    """A provisioned migration of one plain topic and one source group `<p>-g` at the given offsets.

    Returns (p, topic, spec_path, spec). `seeded_partitions` leaves the higher partitions empty.
    """
    p = clusters.unique(prefix)
    topic = clusters.create_topic("source", f"{p}.t", partitions)
    seed_plain(clusters, topic, partitions if seeded_partitions is None else seeded_partitions, per_partition)
    spec_path, spec = write_spec(tmp_path, clusters, p)
    commit_source_group(clusters, f"{p}-g", {(topic, q): o for q, o in group_offsets.items()}, metadata=metadata)
    provision(spec_path)
    provision_groups(spec_path)
    return p, topic, spec_path, spec
