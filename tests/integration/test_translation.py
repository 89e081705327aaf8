"""Translation against real brokers: groups stopped anywhere resume on the destination with no duplicate, no gap."""

from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path

import pytest
from scenarios import (
    COMPACT_CONFIG,
    commit_source_group,
    committed_offsets,
    consume_as_group,
    destination_provenance,
    one_group_migration,
    provision,
    provision_groups,
    seed_compacted,
    seed_plain,
    seed_transactional,
    write_spec,
)

from kafka_ferry.core.offsets.mm2_wire import checkpoints_topic
from kafka_ferry.core.offsets.offset_decisions import decide
from kafka_ferry.core.offsets.offset_translation import TranslationMethod
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.promotion.commit import GroupCommitRefused, commit_translated_offsets
from kafka_ferry.promotion.steps import in_process_final_copy
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.offset_map import Run, translate_with_runs
from kafka_ferry.translation.sync_log import read_checkpoints
from kafka_ferry.translation.translate import checkpoint_translations, export_offset_map, translate_migration

pytestmark = pytest.mark.integration
PARTITIONS = 2


@pytest.fixture(scope="module")
def migrated(clusters, tmp_path_factory):
    """Three topic kinds, groups committed at random positions (holes, aborted records), copied in 2 batches."""
    p = clusters.unique("tr")
    topics = {kind: f"{p}.{kind}" for kind in ("plain", "compact", "txn")}
    clusters.create_topic("source", topics["plain"], PARTITIONS)
    clusters.create_topic("source", topics["compact"], PARTITIONS, COMPACT_CONFIG)
    clusters.create_topic("source", topics["txn"], PARTITIONS)
    seed_plain(clusters, topics["plain"], PARTITIONS, 40)
    seed_compacted(clusters, topics["compact"], PARTITIONS, 60)
    seed_transactional(clusters, topics["txn"], PARTITIONS, 14, plain_between=True)
    spec_path = write_spec(tmp_path_factory.mktemp("tr"), clusters, p,
                                 copy={"spark_connection_id": clusters.SPARK_CONN, "offset_sync_interval": 7,
                                       "max_records_per_partition": 23})  # several batches per partition
    spec = load_spec(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")

    rng = random.Random(20261122)
    committed = {kind: committed_offsets(clusters, "source", t, PARTITIONS) for kind, t in topics.items()}
    ends = source.list_offsets([(t, q) for t in topics.values() for q in range(PARTITIONS)])
    positions: dict[str, dict[tuple[str, int], int]] = {}
    for kind, topic in topics.items():
        for g in range(4):
            positions[f"{p}-{kind}-{g}"] = {(topic, q): rng.randint(0, ends[(topic, q)]) for q in range(PARTITIONS)}
        holes = {q: sorted(set(range(ends[(topic, q)])) - set(committed[kind][q])) for q in range(PARTITIONS)}
        positions[f"{p}-{kind}-hole"] = {(topic, q): rng.choice(holes[q]) if holes[q] else 0 for q in range(PARTITIONS)}
        positions[f"{p}-{kind}-edges"] = {(topic, 0): 0, (topic, 1): ends[(topic, 1)]}
    for group, offsets in positions.items():
        commit_source_group(clusters, group, offsets, metadata=f"meta-{group}")

    provision(spec_path)
    provision_groups(spec_path)
    store = MigrationStateStore(destination, spec.state_topic_name)
    assert in_process_final_copy(spec, source, destination, store)["batches"] >= 2
    result = translate_migration(spec, source, destination, store)
    return {"spec": spec, "spec_path": spec_path, "topics": topics, "positions": positions, "committed": committed,
            "result": result, "store": store}


def test_every_group_resumes_exactly_where_it_stopped(clusters, migrated):
    spec, result = migrated["spec"], migrated["result"]
    destination = clusters.cluster("destination")
    assert checkpoint_translations(spec, destination, result.decisions) == len(result.decisions)
    outcomes = commit_translated_offsets(destination, result.decisions, strict=True)
    assert all(not o.refused and not o.skipped for o in outcomes)
    by_kind = {t: kind for kind, t in migrated["topics"].items()}
    checked = 0
    for group, offsets in migrated["positions"].items():
        topic = next(iter(offsets))[0]
        received = consume_as_group(clusters, group, topic, PARTITIONS)
        for q in range(PARTITIONS):
            expected = [o for o in migrated["committed"][by_kind[topic]][q] if o >= offsets[(topic, q)]]
            assert received[q] == expected, f"{group} {topic}-{q} from {offsets[(topic, q)]}"
            checked += len(expected)
    assert checked > 100
    assert {d.metadata for d in result.decisions} == {f"meta-{g}" for g in migrated["positions"]}
    assert not result.flagged


def test_every_upstream_offset_translates_to_the_next_unconsumed_record(clusters, migrated):
    """Sweep every committed position (incl. holes, markers, aborted records) on every partition."""
    copies = migrated["result"].copies
    for kind, topic in migrated["topics"].items():
        dest = destination_provenance(clusters, topic, PARTITIONS)
        for q in range(PARTITIONS):
            source_offsets = migrated["committed"][kind][q]
            copy = copies[(topic, q)]
            for upstream in range(copy.copied_upstream_end + 1):
                d = decide("g", upstream, "", copy)
                assert d.downstream_offset is not None, f"{topic}-{q} U={upstream} -> {d.describe()}"
                expected = [o for o in source_offsets if o >= upstream]
                got = [src for off, src in dest[q] if off >= d.downstream_offset]
                assert got == expected, f"{topic}-{q} U={upstream} -> {d.describe()}"


def test_offset_map_export_gives_the_same_answers(clusters, migrated, tmp_path):
    spec, copies = migrated["spec"], migrated["result"].copies
    json_path, csv_path = export_offset_map(spec, copies.values(), tmp_path)
    document = json.loads(json_path.read_text())
    assert len(document["partitions"]) == 3 * PARTITIONS
    assert csv_path.read_text().splitlines()[0].startswith("source_topic,partition,destination_topic")
    for entry in document["partitions"]:
        copy = copies[(entry["source_topic"], entry["partition"])]
        runs = [Run(*r) for r in entry["runs"]]
        for upstream in range(entry["copied_upstream_end"] + 1):
            assert translate_with_runs(runs, entry["next_downstream_offset"], upstream) == \
                decide("g", upstream, "", copy).downstream_offset


def test_kafka_checkpoint_formatter_decodes_our_checkpoints(clusters, migrated):
    import subprocess
    import sys
    from pathlib import Path

    spec, destination = migrated["spec"], clusters.cluster("destination")
    checkpoint_translations(spec, destination, migrated["result"].decisions)
    ours = read_checkpoints(destination, checkpoints_topic(spec.source.alias))
    mine = {k: v for k, v in ours.items() if k[0].startswith(spec.name)}
    assert len(mine) == len(migrated["result"].decisions)
    testbed = Path(__file__).resolve().parents[2] / "testbed" / "kafka_testbed.py"
    cp = subprocess.run([sys.executable, str(testbed), "classpath"], capture_output=True, text=True, check=True)
    total = destination.list_offsets([(checkpoints_topic(spec.source.alias), 0)])[(checkpoints_topic("src"), 0)]
    out = subprocess.run(
        ["java", "-cp", cp.stdout.strip(), "org.apache.kafka.tools.consumer.ConsoleConsumer",
         "--bootstrap-server", clusters.destination_bootstrap, "--topic", checkpoints_topic(spec.source.alias),
         "--from-beginning", "--max-messages", str(total),
         "--formatter", "org.apache.kafka.connect.mirror.formatters.CheckpointFormatter"],
        capture_output=True, text=True, timeout=120)
    lines = [line for line in out.stdout.splitlines() if line.startswith("Checkpoint{")]
    for (group, topic, partition), cp_ in mine.items():
        expected = (f"Checkpoint{{consumerGroupId={group}, topicPartition={topic}-{partition}, "
                    f"upstreamOffset={cp_.upstream_offset}, downstreamOffset={cp_.downstream_offset}, "
                    f"metadata={cp_.metadata}}}")
        assert expected in lines, (expected, out.stderr[-2000:])


def test_offsets_beyond_the_copy_are_clamped_and_flagged(clusters, tmp_path, caplog):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "ahead", 1, 10, {0: 4})
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    in_process_final_copy(spec, source, destination, store)
    seed_plain(clusters, topic, 1, 5)  # produced after the copy: offsets 10..14
    commit_source_group(clusters, f"{p}-g", {(topic, 0): 13})

    with caplog.at_level(logging.INFO, logger="kafka_ferry.translation.translate"):
        [decision] = translate_migration(spec, source, destination, store).decisions
    assert decision.method == TranslationMethod.AHEAD_OF_COPY and decision.flagged
    assert decision.downstream_offset == 10 and decision.upstream_lag == -3
    # outside a catch-up (the promotion's translation) a clamp is a finding: a warning of its own
    assert [r.levelname for r in caplog.records if "[ahead-of-copy]" in r.getMessage()] == ["WARNING"]

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kafka_ferry.translation.translate"):
        [again] = translate_migration(spec, source, destination, store, catch_up=True).decisions
    assert again.method == TranslationMethod.AHEAD_OF_COPY and again.flagged  # still in the summary's flagged list
    # after a catch-up batch it is expected: one INFO line for the batch, no warning
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "ahead-of-copy" in r.getMessage()]
    assert len(said) == 1 and said[0][0] == "INFO", said
    assert said[0][1].startswith("translate: 1 group partition(s) committed beyond what the copy has reached so far")


def test_commit_refuses_active_groups_and_never_rewinds(clusters, tmp_path):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "cm", 1, 10, {0: 6}, metadata="keep-me")
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    in_process_final_copy(spec, source, destination, store)
    decisions = translate_migration(spec, source, destination, store).decisions

    commit_source_group_dest = clusters.consumer("destination", f"{p}-g")
    from confluent_kafka import TopicPartition

    commit_source_group_dest.commit(offsets=[TopicPartition(topic, 0, 8)], asynchronous=False)
    commit_source_group_dest.close()
    [ahead] = commit_translated_offsets(destination, decisions)
    assert "not rewinding" in ahead.skipped[f"{topic}:0"]
    assert destination.group_offsets(f"{p}-g")[(topic, 0)] == 8

    [rewound] = commit_translated_offsets(destination, decisions, allow_rewind=True)
    assert rewound.committed == {f"{topic}:0": 6}
    assert destination.group_offsets_with_metadata(f"{p}-g")[(topic, 0)] == (6, "keep-me")

    live = clusters.consumer("destination", f"{p}-g")
    live.subscribe([topic])
    deadline = time.monotonic() + 30
    while not live.assignment() and time.monotonic() < deadline:
        live.poll(0.2)
    try:
        [refused] = commit_translated_offsets(destination, decisions, allow_rewind=True)
        assert refused.refused is not None and "member" in refused.refused
        with pytest.raises(GroupCommitRefused, match=f"group {p}-g"):
            commit_translated_offsets(destination, decisions, allow_rewind=True, strict=True)
    finally:
        live.close()


def test_a_group_on_a_partition_with_nothing_to_copy_starts_at_the_destination_start(clusters, tmp_path):
    # partition 1 stays empty: the planner never writes progress for it
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "empty", 2, 6, {0: 2, 1: 0},
                                                    seeded_partitions=1)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    in_process_final_copy(spec, source, destination, store)

    decisions = translate_migration(spec, source, destination, store).decisions

    assert [(d.partition, d.downstream_offset, d.method, d.flagged) for d in decisions] == [
        (0, 2, "exact-run", False), (1, 0, "nothing-copied", False)]


def test_catch_up_operator_translates_checkpoints_and_exports(clusters, migrated, tmp_path, monkeypatch):
    from kafka_ferry.operators.translation import TranslateOffsetsOperator

    monkeypatch.setenv("KFERRY_WORK_DIR", str(tmp_path))
    summary = TranslateOffsetsOperator(task_id="translate", spec_path=migrated["spec_path"]).execute({})
    assert summary["checkpoints"] == summary["decisions"] == len(migrated["result"].decisions)
    assert summary["flagged"] == [] and "commits" not in summary
    assert json.loads(Path(summary["offset_map"]["json"]).read_text())["migration"] == migrated["spec"].name
