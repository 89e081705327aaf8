"""Rollback of a schema remap migration on the real clusters and real registries: records produced on the destination
after the cutover go back to the source with the SOURCE registry's ids in their registry-serialized values (decoding
there to the same value), keys that are plain binary (8-byte longs whose bytes 1-4 equal a mapped id) byte for byte;
and a record carrying a destination id the forward map never knew refuses the rollback before anything is copied,
naming it (the plan lists it with its destination subject/version).

Two AxonOps registries (fast to start) on this session's helper ports (the `axon_pair` fixture) stand for the source
and destination ones."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import yaml
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from scenarios import BASE_TS, provision, provision_groups, read_partition, write_spec
from schema_support import BY_TOPIC, registry

from kafka_ferry.core.failures import Permanent
from kafka_ferry.core.provenance import read_provenance, user_headers
from kafka_ferry.core.schema_wire import schema_id_of
from kafka_ferry.core.spec import load_spec
from kafka_ferry.operators.rollback import RollbackMigrationOperator
from kafka_ferry.operators.schemas import MigrateSchemasOperator
from kafka_ferry.promotion.rollback import RollbackRunner
from kafka_ferry.promotion.rollback_schema_ids import SchemaIdsNotMappedBack
from kafka_ferry.promotion.steps import PromotionRunner

pytestmark = [pytest.mark.integration, pytest.mark.long]

PARTITIONS = 2
ACCOUNT = {"type": "record", "name": "Account", "namespace": "acme",
           "fields": [{"name": "owner", "type": "string"}, {"name": "balance", "type": "long"}]}
ACCOUNT_V2 = {**ACCOUNT, "fields": [*ACCOUNT["fields"], {"name": "branch", "type": "string", "default": "hq"}]}


def long_key(n: int) -> bytes:
    return struct.pack(">q", n)


def remap_migration(clusters, tmp_path, monkeypatch, axon_pair, names=("accounts",)) -> dict:
    """Topics ``<prefix>.<name>`` with Avro values (subject `<topic>-value` on the source registry, none for keys:
    long keys), migrated in remap mode (every id changes: the destination registry holds other schemas first) and
    provisioned, not promoted. ``topic`` is the first one."""
    source_reg, destination_reg = axon_pair
    p = clusters.unique("rbsr")
    topics = [f"{p}.{n}" for n in names]
    account = json.dumps({**ACCOUNT, "doc": p})  # this test's own content: a registry shares ids by content
    source_sr = SchemaRegistryClient({"url": source_reg.url})
    source_id = {source_sr.register_schema(f"{t}-value", Schema(account, "AVRO")) for t in topics}.pop()
    destination_sr = SchemaRegistryClient({"url": destination_reg.url})
    for i in range(3):  # the destination registry's next id is above the source's: the id changes
        other = {"type": "record", "name": f"Other{i}", "doc": p, "fields": [{"name": "x", "type": "int"}]}
        if destination_sr.register_schema(f"{p}.other{i}-value", Schema(json.dumps(other), "AVRO")) > source_id:
            break
    conf = {"auto.register.schemas": False, "use.latest.version": True, **BY_TOPIC}
    serialize = AvroSerializer(source_sr, account, conf=conf)
    producer = clusters.producer("source", **{"enable.idempotence": True})
    for topic in topics:
        clusters.create_topic("source", topic, partitions=PARTITIONS)
        for i in range(10):
            value = serialize({"owner": f"s{i}", "balance": i}, SerializationContext(topic, MessageField.VALUE))
            producer.produce(topic, key=long_key(i), value=value, partition=i % PARTITIONS, timestamp=BASE_TS + i)
    assert producer.flush(30) == 0

    conns = {"source": f"kf_rbsr_src_{p}", "destination": f"kf_rbsr_dst_{p}"}
    for side, spec in (("source", source_reg), ("destination", destination_reg)):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conns[side].upper()}",
                           json.dumps({"conn_type": "schema_registry", "host": spec.url}))
    spec_path = Path(write_spec(tmp_path, clusters, p, promotion={"quiesce_window_seconds": 1}))
    spec_path.write_text(spec_path.read_text() + yaml.safe_dump({"schema_registry": {
        "source_connection_id": conns["source"], "destination_connection_id": conns["destination"],
        "mode": "remap"}}))
    migrated = MigrateSchemasOperator(task_id="migrate_schemas", spec_path=str(spec_path)).execute({"run_id": "r1"})
    assert {migrated["serialized_fields"][t]["fields"] for t in topics} == {"value"}
    id_map = {int(k): v for k, v in migrated["id_map"].items()}
    assert id_map[source_id] != source_id
    provision(str(spec_path))
    provision_groups(str(spec_path))
    return {"spec": load_spec(spec_path), "spec_path": str(spec_path), "topic": topics[0], "topics": topics,
            "source_id": source_id, "destination_id": id_map[source_id], "work_dir": tmp_path / "work",
            "source_url": source_reg.url, "destination_url": destination_reg.url, "account": account}


def promoted_remap_migration(clusters, tmp_path, monkeypatch, axon_pair) -> dict:
    """One such topic, the migration promoted."""
    m = remap_migration(clusters, tmp_path, monkeypatch, axon_pair)
    promoted = PromotionRunner(m["spec"], clusters.cluster("source"), clusters.cluster("destination"),
                               work_dir=m["work_dir"]).run()
    assert promoted["status"] == "promoted"
    assert promoted["rollback_plan"]["schema_ids"]["unmapped_ids"] == []
    assert_destination_ids(clusters, m)
    return m


def assert_destination_ids(clusters, m) -> None:
    """The forward copy wrote destination ids (what the rollback must undo)."""
    for topic in m["topics"]:
        for q in range(PARTITIONS):
            assert {schema_id_of(r.value) for r in read_partition(clusters, "destination", topic, q)} == {
                m["destination_id"]}, f"{topic}-{q}"


def produce_on_destination(clusters, m, schema: str, tag: str, count: int, topic: str | None = None) -> None:
    """After the cutover: Avro values written with the destination registry's ids, long keys whose bytes 1-4 are the
    destination id (a rewrite of the key would change them), headers, a tombstone; to ``topic`` (default: the
    migration's first)."""
    topic = topic or m["topic"]
    sr = SchemaRegistryClient({"url": m["destination_url"]})
    serialize = AvroSerializer(sr, schema, conf={"auto.register.schemas": False, "use.latest.version": True,
                                                 **BY_TOPIC})
    producer = clusters.producer("destination", **{"enable.idempotence": True})
    for i in range(count):
        value = serialize({"owner": f"{tag}{i}", "balance": 1000 + i},
                          SerializationContext(topic, MessageField.VALUE))
        producer.produce(topic, key=long_key((m["destination_id"] << 24) | i), value=value,
                         partition=i % PARTITIONS, timestamp=BASE_TS + 10**6 + i, headers=[("tag", tag.encode())])
    producer.produce(topic, key=long_key(-1), value=None, partition=0, timestamp=BASE_TS + 2 * 10**6)
    assert producer.flush(30) == 0


def post_cutover(clusters, topic, source_cluster_id):
    return {q: [r for r in read_partition(clusters, "destination", topic, q)
                if read_provenance(r.headers)[0] != source_cluster_id] for q in range(PARTITIONS)}


def assert_copied_back_with_source_ids(clusters, m, topic, post, own_before, ids) -> int:
    """``topic``'s records produced on the destination (``post``, per partition) are on the source once, in order,
    after its own records (``own_before``, untouched): keys, timestamps and headers as they were, values with the
    source registry's id decoding there to the destination's value; returns how many values were checked."""
    decode_source = AvroDeserializer(SchemaRegistryClient({"url": m["source_url"]}), conf=BY_TOPIC)
    decode_destination = AvroDeserializer(SchemaRegistryClient({"url": m["destination_url"]}), conf=BY_TOPIC)
    ctx = SerializationContext(topic, MessageField.VALUE)
    checked = 0
    for q in range(PARTITIONS):
        recs = read_partition(clusters, "source", topic, q)
        own = [r for r in recs if read_provenance(r.headers)[0] != ids["destination"]]
        back = [r for r in recs if read_provenance(r.headers)[0] == ids["destination"]]
        assert own == own_before[q]  # the source's own records untouched
        assert len(back) == len(post[q]) > 0
        for s, d in zip(back, post[q], strict=True):
            where = f"{topic}-{q}: destination offset {d.offset} -> source offset {s.offset}"
            assert s.key == d.key, f"{where}: the long key changed"  # plain binary key: byte for byte
            assert (s.timestamp, list(user_headers(s.headers))) == (d.timestamp, list(user_headers(d.headers))), where
            if d.value is None:
                assert s.value is None, where
                continue
            assert schema_id_of(d.value) == m["destination_id"]
            assert schema_id_of(s.value) == m["source_id"], f"{where}: id not mapped back"
            assert s.value[5:] == d.value[5:], f"{where}: more than the id changed"
            assert decode_source(s.value, ctx) == decode_destination(d.value, ctx), where
            checked += 1
    return checked


def runner(clusters, m, **kwargs) -> RollbackRunner:
    return RollbackRunner(m["spec"], clusters.cluster("source"), clusters.cluster("destination"),
                          work_dir=m["work_dir"], quiesce_window_s=1.0, **kwargs)


def test_remap_rollback_maps_schema_ids_back_and_values_decode_on_the_source(clusters, tmp_path, monkeypatch,
                                                                             axon_pair):
    m = promoted_remap_migration(clusters, tmp_path, monkeypatch, axon_pair)
    produce_on_destination(clusters, m, m["account"], "d", 12)
    ids = {side: clusters.cluster(side).describe_cluster().cluster_id for side in ("source", "destination")}
    post = post_cutover(clusters, m["topic"], ids["source"])
    own_before = {q: read_partition(clusters, "source", m["topic"], q) for q in range(PARTITIONS)}

    plan = runner(clusters, m).plan()
    assert plan["records"] == 13
    assert plan["schema_ids"]["destination_to_source"][str(m["destination_id"])] == m["source_id"]
    assert plan["schema_ids"]["unmapped_ids"] == [] and not plan["schema_ids"]["refused"]

    class Killed(Exception):
        pass

    def die(step):
        if step == "copy_back":
            raise Killed(step)

    with pytest.raises(Killed):  # interrupted after the copy-back: the resumed run reconciles what it copied
        runner(clusters, m, after_step=die).run()
    report = runner(clusters, m).run()
    assert report["status"] == "rolled-back", report
    assert report["this_run"]["copy_back"]["status"] == "resumed"
    ends = clusters.cluster("source").list_offsets([(m["topic"], q) for q in range(PARTITIONS)])
    again = runner(clusters, m).run()  # a second rollback changes nothing
    assert {v["status"] for v in again["this_run"].values()} == {"resumed"}
    assert clusters.cluster("source").list_offsets(list(ends)) == ends

    checked = assert_copied_back_with_source_ids(clusters, m, m["topic"], post, own_before, ids)
    assert checked == 12
    assert report["this_run"]["reconcile"]["summary"]["records_checked"] == 13  # digests over the mapped-back ids


def test_remap_rollback_refuses_an_id_the_forward_map_never_knew_before_copying_anything(
        clusters, tmp_path, monkeypatch, axon_pair):
    m = promoted_remap_migration(clusters, tmp_path, monkeypatch, axon_pair)
    produce_on_destination(clusters, m, m["account"], "d", 4)  # ids the map knows, first in both partitions
    subject = f"{m['topic']}-value"
    v2 = json.dumps({**ACCOUNT_V2, "doc": json.loads(m["account"])["doc"]})
    new_id = SchemaRegistryClient({"url": m["destination_url"]}).register_schema(subject, Schema(v2, "AVRO"))
    assert new_id != m["destination_id"]
    produce_on_destination(clusters, m, v2, "n", 3)  # a schema registered on the destination after the cutover
    ids = {side: clusters.cluster(side).describe_cluster().cluster_id for side in ("source", "destination")}
    first_new = min(r.offset for r in post_cutover(clusters, m["topic"], ids["source"])[0]
                    if r.value is not None and schema_id_of(r.value) == new_id)
    parts = [(m["topic"], q) for q in range(PARTITIONS)]
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
            runner(clusters, m, versions_of_id=destination.versions_of_id).run()
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
