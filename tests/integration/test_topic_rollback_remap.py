"""Rolling back one topic of a staged cutover in schema remap mode, on the real clusters and real registries: two
topics promoted, Avro records produced on the destination for both (the other one also with a schema registered on
the destination after the cutover), one topic goes back: its records are on the source once, in order, with the
SOURCE registry's ids (decoding there to the destination's value), reconciled over the mapped-back ids; the other
topic is untouched and stays promoted, and its unknown id neither shows in the plan of the first nor stops it. Then
rolling the other topic back is refused before anything changes, naming topic, partition, offset, id and its
destination subject/version (the dry run lists the same id)."""

from __future__ import annotations

import json

import pytest
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from scenarios import read_partition
from schema_support import (
    ACCOUNT_V2,
    REMAP_PARTITIONS,
    assert_copied_back_with_source_ids,
    assert_destination_ids,
    produce_remap_on_destination,
    remap_migration,
    remap_post_cutover,
)
from staged_support import thread_copy

from kafka_ferry.core.schemas.schema_wire import schema_id_of
from kafka_ferry.operators.rollback import RollbackMigrationOperator
from kafka_ferry.promotion.topic import promote_topics
from kafka_ferry.promotion.topic_rollback import rollback_topics
from kafka_ferry.state.rollback import topic_rollback
from kafka_ferry.state.staged_cutover import promoted_topics
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.long]


def test_one_topic_of_a_remap_migration_rolls_back_with_source_ids_and_an_unknown_id_refuses_the_other(
        clusters, tmp_path, monkeypatch, axon_pair, work_dir):
    m = remap_migration(clusters, tmp_path, monkeypatch, axon_pair, names=("back", "stays"), group=False)
    back, stays = m["topics"]
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, m["spec"].state_topic_name)
    promote_topics(m["spec"], source, destination, store, [back, stays], "run-topics", thread_copy,
                   quiet_window_s=0.5)
    assert promoted_topics(store) == sorted([back, stays])
    assert_destination_ids(clusters, m)
    ids = {side: clusters.cluster(side).describe_cluster().cluster_id for side in ("source", "destination")}

    # producers now write to the destination: ids the forward map knows on both topics, and on `stays` also a
    # schema registered on the destination after the cutover
    produce_remap_on_destination(clusters, m, m["account"], "d", 12, back)
    produce_remap_on_destination(clusters, m, m["account"], "d", 4, stays)
    subject = f"{stays}-value"
    v2 = json.dumps({**ACCOUNT_V2, "doc": json.loads(m["account"])["doc"]})
    new_id = SchemaRegistryClient({"url": m["destination_url"]}).register_schema(subject, Schema(v2, "AVRO"))
    assert new_id != m["destination_id"]
    produce_remap_on_destination(clusters, m, v2, "n", 3, stays)
    post = {t: remap_post_cutover(clusters, t, ids["source"]) for t in (back, stays)}
    own_before = {q: read_partition(clusters, "source", back, q) for q in range(REMAP_PARTITIONS)}
    parts = {t: [(t, q) for q in range(REMAP_PARTITIONS)] for t in (back, stays)}
    stays_before = (source.list_offsets(parts[stays]), destination.list_offsets(parts[stays]))
    source_ends = source.list_offsets(parts[back])

    # the dry run of `back`: its records only (the unknown id of `stays` is not in it), the id map, nothing changed
    run = {"spec_path": m["spec_path"], "task_id": "rollback"}
    plan = RollbackMigrationOperator(**run, dry_run=True).execute({"params": {"topics": [back]}})
    assert plan["records"] == 13 and {r["source_topic"] for r in plan["copy_back"]} == {back}
    assert plan["schema_ids"]["destination_to_source"][str(m["destination_id"])] == m["source_id"]
    assert plan["schema_ids"]["unmapped_ids"] == [] and not plan["schema_ids"]["refused"]
    assert source.list_offsets(parts[back]) == source_ends and topic_rollback(store, back) is None
    assert f"{m['spec'].state_topic_name}.rollback" not in source.list_topic_names()

    result = RollbackMigrationOperator(**run).execute({"params": {"topics": [back]}})

    record = topic_rollback(store, back)
    assert record is not None
    assert result["topics"] == {back: record} and record["status"] == "rolled-back"
    assert "schema_ids" in record["steps"]["copy_back"]["summary"]
    assert record["steps"]["reconcile"]["summary"]["records_checked"] == 13  # digests over the mapped-back ids
    assert assert_copied_back_with_source_ids(clusters, m, back, post[back], own_before, ids) == 12
    assert promoted_topics(store) == [stays]  # the other topic: still promoted, untouched on both clusters
    assert (source.list_offsets(parts[stays]), destination.list_offsets(parts[stays])) == stays_before
    ends = source.list_offsets(parts[back])
    assert rollback_topics(m["spec"], source, destination, store, [back], quiesce_window_s=0.5) == {back: record}
    assert source.list_offsets(parts[back]) == ends  # a second rollback changes nothing

    # `stays` carries an id the forward map never knew: its dry run names it, its rollback is refused up front
    first_new = min(r.offset for r in post[stays][0] if r.value is not None and schema_id_of(r.value) == new_id)
    plan = RollbackMigrationOperator(**run, dry_run=True).execute({"params": {"topics": [stays]}})
    [row] = plan["schema_ids"]["unmapped_ids"]
    assert (row["schema_id"], row["records"]) == (new_id, 3)
    assert row["subject_versions"] == [{"subject": subject, "version": 2, "soft_deleted": False}]
    assert row["first_record"] == {"topic": stays, "partition": 0, "offset": first_new, "field": "value",
                                   "schema_id": new_id}
    assert plan["schema_ids"]["refused"]
    # this migration's topics only: the source is a shared test bed other tests create topics on meanwhile
    ours = lambda names: {t for t in names if m["spec"].name in t or t in m["topics"]}  # noqa: E731
    source_topics = ours(source.list_topic_names())
    with pytest.raises(AirflowFailException) as failed:  # Permanent: the task fails in one try
        RollbackMigrationOperator(**run).execute({"params": {"topics": [stays]}})
    message = str(failed.value)
    assert f"rollback of topic(s) {stays} of migration {m['spec'].name!r} refused before copying anything" in message
    assert (f"id {new_id} (subject {subject} version 2; 3 record(s), first {stays}-0 at offset {first_new}, "
            "value)") in message, message
    # nothing changed: no step recorded, still promoted, nothing copied or created on the source
    assert topic_rollback(store, stays) is None and promoted_topics(store) == [stays]
    assert (source.list_offsets(parts[stays]), destination.list_offsets(parts[stays])) == stays_before
    assert ours(source.list_topic_names()) == source_topics
