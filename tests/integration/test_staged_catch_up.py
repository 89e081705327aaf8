"""Staged cutover on real brokers: a promoted group's consumer keeps reading on the destination while the scheduled
catch-up runs (pre-flight to translation, on spark-submit and on Spark Connect) keep bringing it what producers still
write to the source; a group not yet promoted with a member on the destination is still refused, by name."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack

import pytest
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka import TopicPartition
from scenarios import (
    catch_up_run,
    commit_source_group,
    one_group_migration,
    provision,
    provision_groups,
    write_spec,
)
from staged_support import Processor, Writer, thread_copy, wait_until

from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND, PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import UnitPromotion
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.kafka.reads import read_ranges
from kafka_ferry.operators.provision import MigrationPreflightOperator, ProvisionMirrorGroupsOperator
from kafka_ferry.operators.staged_promotion import PromoteGroupsOperator
from kafka_ferry.promotion.group import promote_group
from kafka_ferry.promotion.readiness import check_group_offsets_synced
from kafka_ferry.promotion.steps import PromotionRunner
from kafka_ferry.promotion.topic import promote_topics
from kafka_ferry.state.staged_cutover import promoted_groups, save_promotion
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration

PARTITIONS = 3
BATCHES_WHILE_READING = 2


@pytest.mark.spark
def test_a_promoted_group_reads_on_the_destination_while_spark_submit_catch_up_runs_copy(
        clusters, tmp_path, work_dir):
    moved_group_reads_while_catch_up_runs_copy(clusters, tmp_path, "scu", clusters.SPARK_CONN)


@pytest.mark.spark
def test_a_promoted_group_reads_on_the_destination_while_spark_connect_catch_up_runs_copy(
        clusters, tmp_path, work_dir, spark_connect):
    moved_group_reads_while_catch_up_runs_copy(clusters, tmp_path, "scc", spark_connect)


def moved_group_reads_while_catch_up_runs_copy(clusters, tmp_path, prefix: str, spark_conn: str) -> None:
    """Group A stops on the source, is promoted, and its consumer stays subscribed on the destination across
    catch-up runs while a producer writes to the source all along: every run succeeds, each batch's records reach
    the consumer before the next batch, and A processes every source record exactly once across the move."""
    p = clusters.unique(prefix)
    topic = clusters.create_topic("source", f"{p}.t", PARTITIONS)
    spec_path = write_spec(tmp_path, clusters, p, copy={"spark_connection_id": spark_conn})
    spec = load_spec(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    group, mirror = f"{p}-a", spec.topics.rename.destination_topic(topic)

    with ExitStack() as running:
        writer = running.enter_context(Writer(clusters, topic, PARTITIONS, interval_s=0.05))
        on_source = Processor(source, group, topic).start()
        running.callback(on_source.stop)
        wait_until(lambda: len(on_source.partitions_seen) == PARTITIONS,
                   f"group {group} did not process a record of every source partition")
        catch_up_run(spec_path, spark_conn)  # A still reads on the source: recorded, its topic copied
        on_source.stop()  # its last commit is final
        PromoteGroupsOperator(task_id="promote_groups", spec_path=spec_path).execute(
            {"params": {"groups": [group]}, "run_id": f"promote-{group}"})
        assert promoted_groups(store) == [group]
        resume_at = destination.group_offsets(group)
        assert set(resume_at) == {(mirror, q) for q in range(PARTITIONS)}, resume_at

        # a session long enough that a loaded test machine (Spark starting beside it) never times the member out:
        # what must hold is that the catch-up runs leave it alone, not the host's scheduling
        on_destination = Processor(destination, group, mirror, session_timeout_ms=45000).start()
        running.callback(on_destination.stop)
        wait_until(lambda: _members(destination, group) > 0,
                   f"group {group}'s consumer never joined on the destination")
        promoted_copy = _records_since(destination, resume_at)  # what its promotion copied past its last commit
        wait_until(lambda: len(on_destination.processed) >= promoted_copy,
                   f"group {group} did not read the {promoted_copy} records its promotion copied")
        copied_while_reading = []
        for _ in range(BATCHES_WHILE_READING):
            writer.wait_for_more(20)
            before = len(on_destination.processed)
            report = catch_up_run(spec_path, spark_conn)  # refused in pre-flight while A had a member, before #23
            copied = report["records_copied"]
            copied_while_reading.append(copied)
            assert copied > 0, report
            # still subscribed, the consumer gets this batch's records before the next batch starts
            wait_until(lambda: len(on_destination.processed) >= before + copied,  # noqa: B023 - called at once
                       f"group {group} did not receive the {copied} records of a catch-up batch")
            assert len(on_destination.processed) == before + copied, "a record of the batch arrived twice"
            assert _members(destination, group) > 0, f"group {group}'s consumer left during the catch-up runs"
        writer.stop.set()
        writer.thread.join(60)
        assert not writer.thread.is_alive(), "the source writer did not stop"

        for _ in range(5):  # producers stopped: catch-up runs bring the last records (a batch may be bounded)
            if catch_up_run(spec_path, spark_conn)["lag_after_total"] == 0:
                break
        else:
            raise AssertionError("five catch-up runs after the producer stopped left records uncopied")
        stream = _source_stream(source, topic)
        wait_until(lambda: len(on_source.processed) + len(on_destination.processed) >= sum(stream.values()),
                   f"group {group} did not process all {sum(stream.values())} source records")
        on_destination.stop()

    assert not (on_source.errors or on_destination.errors), (on_source.errors, on_destination.errors)
    assert on_source.processed and on_destination.processed  # it really read on both sides
    assert Counter(on_source.processed + on_destination.processed) == stream, \
        f"group {group}: processed records differ from the source stream"
    assert len(copied_while_reading) == BATCHES_WHILE_READING and all(copied_while_reading), copied_while_reading


def test_a_group_not_promoted_with_a_member_on_the_destination_is_still_refused_by_name(clusters, tmp_path):
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "rfp", 1, 10, {0: 4})
    early, moved = f"{p}-g", f"{p}-moved"
    commit_source_group(clusters, moved, {(topic, 0): 6})
    provision_groups(spec_path)
    destination = clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    save_promotion(store, GROUP_PROMOTION_KIND, UnitPromotion(moved, "run-x", started_at_ms=1)
                   .with_step(GROUP_PROMOTION_KIND, "promoted", 2))
    mirror = spec.topics.rename.destination_topic(topic)

    with ExitStack() as members:
        for group in (early, moved):  # both have a consumer on the destination; only `moved` is promoted
            member = clusters.consumer("destination", group)
            members.callback(member.close)
            member.subscribe([mirror])
            wait_until(lambda m=member: m.poll(0.2) is not None or bool(m.assignment()),
                       f"group {group}'s consumer got no assignment on the destination")
        for task in (MigrationPreflightOperator(task_id="preflight", spec_path=spec_path),
                     ProvisionMirrorGroupsOperator(task_id="provision_groups", spec_path=spec_path)):
            with pytest.raises(AirflowFailException, match=f"group {early}: has 1 active member") as refused:
                task.execute({})
            assert moved not in str(refused.value), str(refused.value)

    diff = MigrationPreflightOperator(task_id="preflight", spec_path=spec_path).execute({})
    assert diff["groups"]["promoted"] == {moved: [topic]} and early in diff["groups"]["migrated"]


def test_a_group_whose_promotion_ends_while_preflight_looks_at_the_destination_is_not_refused(
        clusters, tmp_path, monkeypatch):
    """The race of a promotion finishing during a catch-up run's pre-flight: the group's promotion is in flight
    (committed on the destination, not yet marked) when pre-flight lists the destination groups; it ends and the
    group's consumer starts just before pre-flight describes them. Pre-flight reads the promotions after that
    description, so it sees the member *and* the mark, and leaves the group alone (reading them before would refuse
    the group its own promotion just let in)."""
    from kafka_ferry.kafka.cluster import KafkaCluster

    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "pfr", 1, 10, {0: 4})
    group = f"{p}-g"
    destination = clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    mirror = spec.topics.rename.destination_topic(topic)
    in_flight = UnitPromotion(group, "run-g", started_at_ms=1)
    for step in ("source_quiet", "final_copy", "translated"):
        in_flight = in_flight.with_step(GROUP_PROMOTION_KIND, step, 1)
    save_promotion(store, GROUP_PROMOTION_KIND, in_flight)
    destination_consumer = clusters.consumer("destination", group)
    destination_consumer.commit(offsets=[TopicPartition(mirror, 0, 0)], asynchronous=False)  # its "committed" step

    real_describe = KafkaCluster.describe_groups
    started: list[str] = []

    def promotion_ends_first(cluster, group_ids):
        group_ids = sorted(set(group_ids))
        if group in group_ids and not started:
            save_promotion(store, GROUP_PROMOTION_KIND, in_flight.with_step(GROUP_PROMOTION_KIND, "committed", 2)
                           .with_step(GROUP_PROMOTION_KIND, "reconciled", 2)
                           .with_step(GROUP_PROMOTION_KIND, "promoted", 2))
            destination_consumer.subscribe([mirror])
            started.append(group)
            wait_until(lambda: destination_consumer.poll(0.2) is not None or bool(destination_consumer.assignment()),
                       f"group {group}'s consumer got no assignment on the destination")
        return real_describe(cluster, group_ids)

    try:
        monkeypatch.setattr(KafkaCluster, "describe_groups", promotion_ends_first)
        diff = MigrationPreflightOperator(task_id="preflight", spec_path=spec_path).execute({})
        monkeypatch.undo()
        assert started == [group], "pre-flight never described the group on the destination"
        assert _members(destination, group) == 1
    finally:
        destination_consumer.close()
    assert diff["groups"]["promoted"] == {group: [topic]} and group not in diff["groups"]["migrated"], diff["groups"]


def test_the_whole_promotion_leaves_a_promoted_group_reading_on_the_destination_to_its_consumer(
        clusters, tmp_path, work_dir):
    """Mode promote after a staged group promotion: the group's consumer already reads on the destination, so the
    final translation and commit leave it alone (its commit was refused for those members, before #23)."""
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "wpg", 1, 20, {0: 5})
    moved, other = f"{p}-g", f"{p}-h"
    commit_source_group(clusters, other, {(topic, 0): 9})
    provision_groups(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    mirror = spec.topics.rename.destination_topic(topic)
    assert promote_group(spec, source, destination, store, moved, "run-g", thread_copy).promoted

    with ExitStack() as running:
        reader = Processor(destination, moved, mirror).start()
        running.callback(reader.stop)
        wait_until(lambda: len(reader.processed) == 15 and _members(destination, moved) > 0,
                   f"group {moved}'s consumer did not read the 15 records after its last source commit")
        its_own = destination.group_offsets(moved)
        promoted = PromotionRunner(spec, source, destination, store, work_dir=work_dir).run()
        assert promoted["status"] == "promoted", promoted
        assert _members(destination, moved) > 0, f"group {moved}'s consumer left during the promotion"
    assert destination.group_offsets(moved) == its_own  # its consumer's commits, untouched
    assert check_group_offsets_synced(destination, store)[0]  # the gate before the mark checks only `other`
    assert [(d["group"], d["upstream_offset"]) for d in stored_decisions_of(store)] == [(other, 9)]
    assert len(destination.group_offsets(other)) == 1  # the group not promoted before is committed by the promotion


def test_a_promoted_topic_is_left_as_its_new_producers_have_it_by_catch_up_provisioning(clusters, tmp_path):
    """After promote-topics the mirror is the tenant's: a config its owners changed stays, and neither pre-flight
    nor provisioning plans it (before #23 the next catch-up run set the source's value back)."""
    p, topic, spec_path, spec = one_group_migration(clusters, tmp_path, "ptl", 1, 10, {0: 4})
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    mirror = spec.topics.rename.destination_topic(topic)
    promote_group(spec, source, destination, store, f"{p}-g", "run-g", thread_copy)
    promote_topics(spec, source, destination, store, [topic], "run-t", thread_copy, quiet_window_s=0.5)
    destination.set_topic_configs(mirror, {"retention.ms": "3600000"})  # its owners' choice now

    diff = MigrationPreflightOperator(task_id="preflight", spec_path=spec_path).execute({})
    applied = provision(spec_path)

    assert destination.describe_topics([mirror])[mirror].configs["retention.ms"] == "3600000"
    assert applied["applied"] == [] and diff["topics"]["changes"] == [], (applied, diff["topics"])
    assert diff["promoted_topics"] == [topic]


def stored_decisions_of(store) -> list[dict]:
    from kafka_ferry.state.offset_decisions import stored_decisions

    return [d.as_dict() for d in stored_decisions(store.read_kind(PROMOTION_KIND))]


def _members(destination, group: str) -> int:
    info = destination.describe_groups([group]).get(group)
    return info.member_count if info else 0


def _records_since(destination, starts: dict[tuple[str, int], int]) -> int:
    """Records (markers not counted) on the destination from ``starts`` to the partitions' end."""
    ends = destination.list_offsets(list(starts), "latest", read_committed=True)
    return sum(1 for _ in read_ranges(destination, {tp: (starts[tp], ends[tp]) for tp in starts}))


def _source_stream(source, topic: str) -> Counter:
    parts = [(topic, q) for q in range(PARTITIONS)]
    ends = source.list_offsets(parts, "latest", read_committed=True)
    return Counter((msg.partition(), msg.value()) for msg in read_ranges(source, {tp: (0, ends[tp]) for tp in parts}))
