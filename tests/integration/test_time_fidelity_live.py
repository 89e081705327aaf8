"""Record timestamps across the copy, on the real clusters: LogAppendTime topics, timestamp limits, time seeks."""

from __future__ import annotations

import random
import time

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, TopicPartition
from scenarios import COMPACT_CONFIG, commit_source_group, provision, provision_groups, seed_compacted, write_spec

from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.core.provisioning.time_fidelity import AFTER_MAX_MS, BEFORE_MAX_MS, TIMESTAMP_TYPE, UNLIMITED
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.kafka.reads import consumed_headers, consumed_partition, read_whole_partitions
from kafka_ferry.operators.provision import MigrationPreflightOperator
from kafka_ferry.promotion.steps import PromotionRunner, in_process_final_copy
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import translate_migration

pytestmark = pytest.mark.integration

DAY_MS = 24 * 3600 * 1000


class Killed(Exception):
    """The test's stand-in for a worker killed between two promotion steps."""


def source_records(clusters, topic: str, partitions: int) -> dict[int, list[tuple[int, int, int]]]:
    """(offset, timestamp type, timestamp) of every committed source record, per partition."""
    out: dict[int, list] = {q: [] for q in range(partitions)}
    for msg in read_whole_partitions(clusters.cluster("source"), [(topic, q) for q in range(partitions)]):
        out[consumed_partition(msg)[1]].append((msg.offset(), *msg.timestamp()))
    return {q: sorted(rows) for q, rows in out.items()}


def destination_records(clusters, topic: str, partitions: int) -> dict[int, list[tuple[int, int, int]]]:
    """(source offset from provenance, timestamp type, timestamp) of every destination record, in order."""
    out: dict[int, list] = {q: [] for q in range(partitions)}
    for msg in read_whole_partitions(clusters.cluster("destination"), [(topic, q) for q in range(partitions)]):
        source_offset = read_provenance(consumed_headers(msg))[1]
        out[consumed_partition(msg)[1]].append((msg.offset(), source_offset, *msg.timestamp()))
    return {q: [row[1:] for row in sorted(rows)] for q, rows in out.items()}


def destination_config(clusters, topic: str, *names: str) -> dict[str, str]:
    configs = clusters.cluster("destination").describe_topics([topic])[topic].configs
    return {name: configs.get(name) for name in names}


def copy_everything(clusters, spec) -> dict:
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    return in_process_final_copy(spec, source, destination, MigrationStateStore(destination, spec.state_topic_name))


def promotion(clusters, spec, tmp_path, **kwargs) -> PromotionRunner:
    return PromotionRunner(spec, clusters.cluster("source"), clusters.cluster("destination"),
                           work_dir=tmp_path / "work", **kwargs)


def seed_log_append_time(clusters, topic: str, partitions: int, rounds: int, per_round: int) -> None:
    """Records whose CreateTime (1 s after the epoch) the source broker replaces with its append time."""
    producer = clusters.producer("source")
    for r in range(rounds):
        for q in range(partitions):
            for i in range(per_round):
                producer.produce(topic, key=f"k{i % 7}".encode(), value=f"r{r}-{q}-{i}".encode(), partition=q,
                                 timestamp=1_000)
        assert producer.flush(30) == 0
        time.sleep(0.02)  # several append times per partition


def test_log_append_time_topic_copied_in_two_batches_keeps_every_timestamp_and_switches_at_promotion(
        clusters, tmp_path):
    p = clusters.unique("lat")
    topic = clusters.create_topic("source", f"{p}.t", 2, {TIMESTAMP_TYPE: "LogAppendTime"})
    seed_log_append_time(clusters, topic, 2, rounds=4, per_round=25)
    commit_source_group(clusters, f"{p}-g", {(topic, 0): 50, (topic, 1): 100})
    spec_path = write_spec(tmp_path, clusters, p, copy={
        "spark_connection_id": clusters.SPARK_CONN, "offset_sync_interval": 7, "max_records_per_partition": 60})
    spec = load_spec(spec_path)

    diff = MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})

    assert diff["timestamps"] == [
        f"{topic}: source {topic} is LogAppendTime; the mirror is CreateTime while copying (records keep the "
        "source's append times) and LogAppendTime from promotion on",
        f"{topic}: {BEFORE_MAX_MS} unlimited while copying (records of any age are kept), back to the destination "
        "broker's default at promotion",
        f"{topic}: {AFTER_MAX_MS} unlimited while copying (records of any age are kept), back to the destination "
        "broker's default at promotion",
    ]
    provision(spec_path)
    provision_groups(spec_path)
    assert destination_config(clusters, topic, TIMESTAMP_TYPE, BEFORE_MAX_MS, AFTER_MAX_MS) == {
        TIMESTAMP_TYPE: "CreateTime", BEFORE_MAX_MS: UNLIMITED, AFTER_MAX_MS: UNLIMITED}

    assert copy_everything(clusters, spec) == {"batches": 2, "records_copied": 200}

    source = source_records(clusters, topic, 2)
    assert {kind for rows in source.values() for _, kind, _ in rows} == {TIMESTAMP_LOG_APPEND_TIME}
    assert all(ts > 1_000 for rows in source.values() for _, _, ts in rows)  # the broker's, not the producer's
    expected = {q: [(offset, TIMESTAMP_CREATE_TIME, ts) for offset, _, ts in rows] for q, rows in source.items()}
    assert destination_records(clusters, topic, 2) == expected  # 200 of 200 timestamps kept

    def kill_after_final_copy(step: str) -> None:
        if step == "final_copy":
            raise Killed(step)

    with pytest.raises(Killed):
        promotion(clusters, spec, tmp_path, after_step=kill_after_final_copy).run()
    assert destination_config(clusters, topic, TIMESTAMP_TYPE) == {TIMESTAMP_TYPE: "CreateTime"}

    report = promotion(clusters, spec, tmp_path).run()

    assert report["status"] == "promoted"
    assert report["this_run"]["final_copy"] == {"status": "resumed"}
    assert report["this_run"]["switch_timestamps"]["summary"] == {"topics": 1, "switched_to_log_append_time": 1}
    assert report["timestamps"][topic]["status"] == "switched"
    assert report["timestamps"][topic]["at_promotion"] == {
        TIMESTAMP_TYPE: "LogAppendTime", BEFORE_MAX_MS: None, AFTER_MAX_MS: None}
    assert destination_config(clusters, topic, TIMESTAMP_TYPE, BEFORE_MAX_MS, AFTER_MAX_MS) == {
        TIMESTAMP_TYPE: "LogAppendTime", BEFORE_MAX_MS: UNLIMITED, AFTER_MAX_MS: "3600000"}  # 4.3's defaults
    assert destination_records(clusters, topic, 2) == expected  # the switch leaves stored records as they are
    stamps = [ts for rows in source.values() for _, _, ts in rows]
    # time seeks on the mirror, now LogAppendTime, still land on the translated source seek
    assert_seeks_translate(clusters, spec, topic, 2, seek_times(random.Random(7), stamps))

    before_ms = int(time.time() * 1000)
    producer = clusters.producer("destination")
    producer.produce(topic, value=b"after cutover", partition=0, timestamp=1_000)
    assert producer.flush(30) == 0
    end = clusters.cluster("destination").list_offsets([(topic, 0)])[(topic, 0)]
    consumer = clusters.consumer("destination")
    consumer.assign([TopicPartition(topic, 0, end - 1)])
    msg = consumer.poll(30)
    consumer.close()
    assert msg is not None and msg.value() == b"after cutover"
    kind, ts = msg.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME and ts >= before_ms  # the broker's time, not the producer's 1000


def test_timestamp_limits_are_lifted_for_the_copy_and_restored_at_promotion(clusters, tmp_path):
    p = clusters.unique("lim")
    topic = clusters.create_topic("source", f"{p}.t", 1)
    now = int(time.time() * 1000)
    stamps = [now - 10 * DAY_MS, now - 10 * DAY_MS + 1, now + 3 * 3600 * 1000, now - 1000]
    producer = clusters.producer("source")
    for i, ts in enumerate(stamps):
        producer.produce(topic, value=f"v{i}".encode(), partition=0, timestamp=ts)
    assert producer.flush(30) == 0
    # the destination team's topic accepts records up to a day old and an hour ahead (Kafka 4's default)
    clusters.create_topic("destination", topic, 1, {BEFORE_MAX_MS: str(DAY_MS)})
    # empty, so the migration may take it over when the spec says so (topics.adopt)
    spec_path = write_spec(tmp_path, clusters, p, topics={"include": [f"{p}\\..*"], "adopt": [topic]})
    spec = load_spec(spec_path)
    provision(spec_path)
    assert destination_config(clusters, topic, BEFORE_MAX_MS, AFTER_MAX_MS) == {
        BEFORE_MAX_MS: UNLIMITED, AFTER_MAX_MS: UNLIMITED}

    copy_everything(clusters, spec)

    assert [ts for _, _, ts in destination_records(clusters, topic, 1)[0]] == stamps
    report = promotion(clusters, spec, tmp_path).run()
    assert report["timestamps"][topic]["at_promotion"] == {BEFORE_MAX_MS: str(DAY_MS), AFTER_MAX_MS: "3600000"}
    assert destination_config(clusters, topic, BEFORE_MAX_MS, AFTER_MAX_MS) == {
        BEFORE_MAX_MS: str(DAY_MS), AFTER_MAX_MS: "3600000"}
    # restored: the destination refuses again what the copy needed the lifted limits for
    errors = []
    late = clusters.producer("destination", **{"message.send.max.retries": 0})
    late.produce(topic, value=b"old", partition=0, timestamp=stamps[0], on_delivery=lambda err, _m: errors.append(err))
    late.flush(30)
    assert errors and errors[0] is not None and errors[0].name() == "INVALID_TIMESTAMP"


SEEKS_PER_KIND = 50


def seek_times(rng: random.Random, stamps: list[int]) -> list[int]:
    """Half exactly on record timestamps (seek to an event), half anywhere around them (seek to a time)."""
    low, high = min(stamps) - 1000, max(stamps) + 1000
    return ([rng.choice(stamps) for _ in range(SEEKS_PER_KIND // 2)]
            + [rng.randint(low, high) for _ in range(SEEKS_PER_KIND - SEEKS_PER_KIND // 2)])


def test_time_seeks_on_the_destination_land_on_the_translated_source_seek(clusters, tmp_path):
    p = clusters.unique("seek")
    rng = random.Random(20261122)
    base = int(time.time() * 1000) - 3600 * 1000
    random_stamp = {"create": lambda q, i: base + rng.randrange(0, 600_000)}  # non-monotonic on purpose
    topics = {
        "create": clusters.create_topic("source", f"{p}.create", 2),
        "compacted": clusters.create_topic("source", f"{p}.compacted", 2, COMPACT_CONFIG),
        "log-append": clusters.create_topic("source", f"{p}.log-append", 2, {TIMESTAMP_TYPE: "LogAppendTime"}),
    }
    producer = clusters.producer("source")
    for q in range(2):
        for i in range(150):
            producer.produce(topics["create"], value=f"c{q}-{i}".encode(), partition=q,
                             timestamp=random_stamp["create"](q, i))
    assert producer.flush(30) == 0
    # every third key is unique and survives: the cleaner's holes fall between surviving records
    seed_compacted(clusters, topics["compacted"], 2, 90, timestamp_of=random_stamp["create"],
                   key_of=lambda i: f"once{i}" if i % 3 == 0 else f"again{i % 4}")
    seed_log_append_time(clusters, topics["log-append"], 2, rounds=10, per_round=12)
    spec_path = write_spec(tmp_path, clusters, p)
    spec = load_spec(spec_path)
    provision(spec_path)
    copy_everything(clusters, spec)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    copies = translate_migration(spec, source, destination,
                                 MigrationStateStore(destination, spec.state_topic_name)).copies

    for kind, topic in topics.items():
        records = source_records(clusters, topic, 2)
        stamps = [ts for rows in records.values() for _, _, ts in rows]
        pairs = [(a, b) for rows in records.values() for a, b in zip(rows, rows[1:], strict=False)]
        if kind == "compacted":  # holes: offsets the cleaner removed between the remaining records
            assert any(b[0] - a[0] > 1 for a, b in pairs)
        if kind == "create":  # a later offset with an earlier timestamp
            assert any(b[2] < a[2] for a, b in pairs)
        assert_seeks_translate(clusters, spec, topic, 2, seek_times(rng, stamps), copies)


def assert_seeks_translate(clusters, spec, topic: str, partitions: int, times: list[int], copies=None) -> None:
    """For each T: the destination's offsets_for_times(T) is the translation of the source's, per partition."""
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    if copies is None:
        copies = translate_migration(spec, source, destination,
                                     MigrationStateStore(destination, spec.state_topic_name)).copies
    parts = [(topic, q) for q in range(partitions)]
    for t in times:
        upstream = source.list_offsets(parts, "time", timestamp_ms=t)
        downstream = destination.list_offsets(parts, "time", timestamp_ms=t)
        for tp in parts:
            copy = copies[tp]
            expected = (-1 if upstream[tp] < 0 else
                        copy.offset_map.translate_exact(upstream[tp], copy.copied_upstream_end).downstream_offset)
            assert downstream[tp] == expected, (tp, t, upstream[tp])
