"""Rollback of a schema remap migration on the real clusters and real registries: records produced on the destination
after the cutover go back to the source with the SOURCE registry's ids in their registry-serialized values (decoding
there to the same value), keys that are plain binary (8-byte longs whose bytes 1-4 equal a mapped id) byte for byte,
and the migrated group reads on on the source exactly where it stopped; a record carrying a destination id the
forward map never knew refuses the rollback before anything is copied, naming it (the plan lists it with its
destination subject/version). A remap rollback killed after each step: faults/test_rollback_kills.py.

Two AxonOps registries (fast to start) on this session's helper ports stand for the source and destination ones
(the `axon_pair` fixture); the migration and the checks are schema_support's."""

from __future__ import annotations

import json

import pytest
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from schema_support import (
    ACCOUNT_V2,
    REMAP_PARTITIONS,
    assert_remap_rolled_back,
    produce_remap_on_destination,
    promoted_remap_migration,
    registry,
    remap_post_cutover,
    remap_rollback,
    stop_remap_on_destination,
)

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.schemas.schema_wire import schema_id_of
from kafka_ferry.operators.rollback import RollbackMigrationOperator
from kafka_ferry.promotion.rollback_schema_ids import SchemaIdsNotMappedBack

pytestmark = [pytest.mark.integration, pytest.mark.long]


def test_remap_rollback_maps_schema_ids_back_and_values_decode_on_the_source(clusters, tmp_path, monkeypatch,
                                                                             axon_pair):
    m = promoted_remap_migration(clusters, tmp_path, monkeypatch, axon_pair)
    produce_remap_on_destination(clusters, m, m["account"], "d", 12)
    # the group stops among the post-cutover records of partition 0 (7 of them: 6 values, a tombstone) and at the
    # end of partition 1: it resumes on the source through the copy-back's syncs
    stop_remap_on_destination(clusters, m, {0: 4, 1: None})

    plan = remap_rollback(clusters, m).plan()
    assert plan["records"] == 13
    assert plan["schema_ids"]["destination_to_source"][str(m["destination_id"])] == m["source_id"]
    assert plan["schema_ids"]["unmapped_ids"] == [] and not plan["schema_ids"]["refused"]

    class Killed(Exception):
        pass

    def die(step):
        if step == "copy_back":
            raise Killed(step)

    with pytest.raises(Killed):  # interrupted after the copy-back: the resumed run reconciles what it copied
        remap_rollback(clusters, m, after_step=die).run()
    report = remap_rollback(clusters, m).run()
    assert report["status"] == "rolled-back", report
    assert report["this_run"]["copy_back"]["status"] == "resumed"
    ends = clusters.cluster("source").list_offsets([(m["topic"], q) for q in range(REMAP_PARTITIONS)])
    again = remap_rollback(clusters, m).run()  # a second rollback changes nothing
    assert {v["status"] for v in again["this_run"].values()} == {"resumed"}
    assert clusters.cluster("source").list_offsets(list(ends)) == ends

    assert assert_remap_rolled_back(clusters, m) == 12
    assert report["this_run"]["reconcile"]["summary"]["records_checked"] == 13  # digests over the mapped-back ids


def test_remap_rollback_refuses_an_id_the_forward_map_never_knew_before_copying_anything(
        clusters, tmp_path, monkeypatch, axon_pair):
    m = promoted_remap_migration(clusters, tmp_path, monkeypatch, axon_pair)
    produce_remap_on_destination(clusters, m, m["account"], "d", 4)  # ids the map knows, first in both partitions
    subject = f"{m['topic']}-value"
    v2 = json.dumps({**ACCOUNT_V2, "doc": json.loads(m["account"])["doc"]})
    new_id = SchemaRegistryClient({"url": m["destination_url"]}).register_schema(subject, Schema(v2, "AVRO"))
    assert new_id != m["destination_id"]
    produce_remap_on_destination(clusters, m, v2, "n", 3)  # a schema registered on the destination after the cutover
    ids = {side: clusters.cluster(side).describe_cluster().cluster_id for side in ("source", "destination")}
    first_new = min(r.offset for r in remap_post_cutover(clusters, m["topic"], ids["source"])[0]
                    if r.value is not None and schema_id_of(r.value) == new_id)
    parts = [(m["topic"], q) for q in range(REMAP_PARTITIONS)]
    source_ends = clusters.cluster("source").list_offsets(parts)
    # this migration's topics only: the source is a shared test bed other tests create topics on meanwhile
    ours = lambda names: {t for t in names if m["spec"].name in t or m["topic"] in t}  # noqa: E731
    source_topics = ours(clusters.cluster("source").list_topic_names())

    # the rollback-plan task (a dry run, asking the destination registry for subject/version) lists the id
    plan = RollbackMigrationOperator(task_id="rollback", spec_path=m["spec_path"], dry_run=True,
                                     work_dir=str(m["work_dir"])).execute({})
    [row] = plan["schema_ids"]["unmapped_ids"]
    assert (row["schema_id"], row["records"]) == (new_id, 3)
    assert row["subject_versions"] == [{"subject": subject, "version": 2, "soft_deleted": False}]
    assert row["first_record"] == {"topic": m["topic"], "partition": 0, "offset": first_new, "field": "value",
                                   "schema_id": new_id}
    assert plan["schema_ids"]["refused"]
    assert clusters.cluster("source").list_offsets(parts) == source_ends

    destination = registry(m["destination_url"], "destination")
    try:
        with pytest.raises(SchemaIdsNotMappedBack) as info:  # the runner's error ...
            remap_rollback(clusters, m, versions_of_id=destination.versions_of_id).run()
    finally:
        destination.close()
    assert isinstance(info.value, Permanent)  # no retry can heal it
    with pytest.raises(AirflowFailException) as failed:  # ... fails the task in one try, naming record and id
        RollbackMigrationOperator(task_id="rollback", spec_path=m["spec_path"], work_dir=str(m["work_dir"])
                                  ).execute({})
    for message in (str(info.value), str(failed.value)):
        assert (f"id {new_id} (subject {subject} version 2; 3 record(s), first {m['topic']}-0 at offset "
                f"{first_new}, value)") in message, message
        assert "refused before copying anything" in message
    # nothing copied, nothing created on the source
    assert clusters.cluster("source").list_offsets(parts) == source_ends
    assert ours(clusters.cluster("source").list_topic_names()) == source_topics
