"""Schema migration against real registries: Apicurio as source and remap destination, AxonOps for preserve."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Message, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf.json_format import MessageToDict
from scenarios import commit_source_group, consume_as_group, provision, provision_groups, run_batch, write_spec
from schema_support import BY_TOPIC, CuttableProxy, ping_class, registry, seed_tenant

import schema_registries as srtb
from kafka_ferry.core.common.state_records import DECODE_CHECK_KIND, SCHEMA_ID_KIND
from kafka_ferry.core.schemas.protobuf_schema import serialized_descriptor
from kafka_ferry.core.schemas.schema_decode import PayloadChecker, top_level_messages
from kafka_ferry.core.schemas.schema_forms import canonical
from kafka_ferry.core.schemas.schema_wire import SchemaIdRewriter, schema_id_of, with_schema_id
from kafka_ferry.core.specs.spec import SchemaRegistryRef, load_spec
from kafka_ferry.operators.schemas import MigrateSchemasOperator
from kafka_ferry.promotion.commit import commit_translated_offsets
from kafka_ferry.promotion.reconcile import reconcile, reconcile_copies
from kafka_ferry.registry.client import SchemaRegistry, SchemaRegistryUnavailable
from kafka_ferry.schemas.decode_check import check_decoding
from kafka_ferry.schemas.schemas import SchemaMigrationError, migrate_schemas
from kafka_ferry.state.progress import read_progress
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import load_partition_copies, translate_migration

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tenant(registries, clusters):
    return seed_tenant(srtb.SOURCE.url, clusters, clusters.unique("sr"))


def settings(tenant, mode, **more):
    """The spec's defaults but for the RecordNameStrategy subject: soft-deleted versions move (the default)."""
    return SchemaRegistryRef(source_connection_id="sr_src", destination_connection_id="sr_dst", mode=mode,
                             subjects_include=(re.escape(tenant.audit_subject),), **more)


def source():
    return registry(srtb.SOURCE.url, "apicurio-source")


def read_source_records(clusters, topic, side="source"):
    consumer = clusters.consumer(side)
    parts = [TopicPartition(topic, p, 0) for p in (0, 1)]
    consumer.assign(parts)
    out: list[Message] = []
    while len(out) < 25:
        msg = consumer.poll(5)
        assert msg is not None, f"only {len(out)} records read from {topic}"
        out.append(msg)
    consumer.close()
    return out


SERIALIZED = ("orders", "payments", "events", "pings")  # the roles whose topics hold serialized records


def _protobuf_deserializer():
    """Ping values as dicts. Without a registry client: confluent-kafka's deserializer asks for the writer schema
    `format=serialized`, and Apicurio 3.3.3 answers raw descriptor bytes it cannot read (measured)."""
    deserialize = ProtobufDeserializer(ping_class(), {"use.deprecated.format": False})
    return lambda value, ctx: MessageToDict(deserialize(value, ctx), preserving_proto_field_name=True)


def decode_all(tenant, clusters, registry_url, rewriter=None, side="source"):
    """Every record of the tenant's serialized topics, decoded against `registry_url` (after a rewrite)."""
    client = SchemaRegistryClient({"url": registry_url})
    decoded = {}
    for role in SERIALIZED:
        topic = tenant.topics[role]
        value_de = {"events": JSONDeserializer(None, schema_registry_client=client, conf=BY_TOPIC),
                    "pings": _protobuf_deserializer()}.get(role) or AvroDeserializer(client, conf=BY_TOPIC)
        values = []
        for msg in read_source_records(clusters, topic, side):
            value = rewriter.rewrite(msg.value()) if rewriter else msg.value()
            ctx = SerializationContext(topic, MessageField.VALUE)
            values.append((schema_id_of(value), value_de(value, ctx)))
            if msg.key() is not None:
                key = rewriter.rewrite(msg.key()) if rewriter else msg.key()
                key_ctx = SerializationContext(topic, MessageField.KEY)
                assert AvroDeserializer(client, conf=BY_TOPIC)(key, key_ctx).startswith("k")
        decoded[topic] = values
    return decoded


def assert_same_subjects(src: SchemaRegistry, dst: SchemaRegistry, subject_map, same_ids: bool):
    for s_name, d_name in subject_map.items():
        s, d = src.read_subject(s_name), dst.read_subject(d_name)
        assert s is not None, f"{s_name} missing on the source"
        assert d is not None, f"{d_name} missing on the destination"
        assert [v.version for v in d.versions] == [v.version for v in s.versions] or not same_ids
        assert [v.deleted for v in d.versions] == [v.deleted for v in s.versions]
        for sv, dv in zip(s.versions, d.versions, strict=True):
            assert canonical(sv.schema, sv.schema_type) == canonical(dv.schema, dv.schema_type), (s_name, sv.version)
            assert (sv.schema_id == dv.schema_id) == same_ids or not same_ids
    assert_same_effective_compatibility(src, dst, subject_map)


def assert_same_effective_compatibility(src: SchemaRegistry, dst: SchemaRegistry, subject_map):
    """Per subject: the level each registry enforces (its own, else its global), asked on both sides."""
    src_global, dst_global = src.global_compatibility(), dst.global_compatibility()
    levels = {d: (src.effective_compatibility(s, src_global), dst.effective_compatibility(d, dst_global))
              for s, d in subject_map.items()}
    assert {d: pair for d, pair in levels.items() if pair[0] != pair[1]} == {}
    assert src_global == "BACKWARD" and "BACKWARD" in {pair[0] for pair in levels.values()}


def assert_retired_version_decodes(tenant, decoded, retired_id):
    """The records written with the soft-deleted version carry its (destination) id and decode there."""
    orders = tenant.topics["orders"]
    carried = [(i, v) for i, v in decoded[orders] if v.get("note2") == "retired"]
    assert len(carried) == len(tenant.retired[orders]) == 5
    assert {i for i, _ in carried} == {retired_id}


def test_remap_into_apicurio_every_version_present_and_every_record_decodes(tenant, clusters):
    dst = registry(srtb.REMAP.url, "apicurio-remap")
    topics = {t: f"eu.{t}" for t in tenant.topics.values()}
    result = migrate_schemas(source(), dst, settings(tenant, "remap"), topics)
    assert len(result.subjects) >= 20
    assert f"eu.{tenant.topics['orders']}-value" in result.subjects.values()
    assert result.registered >= 24
    assert_same_subjects(source(), dst, result.subjects, same_ids=False)

    expected = decode_all(tenant, clusters, srtb.SOURCE.url)
    rewritten = decode_all(tenant, clusters, srtb.REMAP.url, SchemaIdRewriter(result.id_map))
    for topic, values in expected.items():
        assert [v for _, v in rewritten[topic]] == [v for _, v in values], topic
        assert {i for i, _ in rewritten[topic]} == {result.id_map[i] for i, _ in values}
    assert_retired_version_decodes(tenant, rewritten, result.id_map[tenant.retired_id])

    again = migrate_schemas(source(), dst, settings(tenant, "remap"), topics)
    assert (again.registered, again.diff) == (0, [])
    assert again.id_map == result.id_map


def test_preserve_into_axonops_keeps_ids_and_versions_and_records_decode_unchanged(tenant, clusters):
    dst = registry(srtb.PRESERVE.url, "axonops")
    topics = {t: t for t in tenant.topics.values()}
    result = migrate_schemas(source(), dst, settings(tenant, "preserve"), topics)
    assert result.registered >= 24
    assert all(k == v for k, v in result.id_map.items())
    assert_same_subjects(source(), dst, result.subjects, same_ids=True)
    decoded = decode_all(tenant, clusters, srtb.PRESERVE.url)
    assert decoded == decode_all(tenant, clusters, srtb.SOURCE.url)
    assert_retired_version_decodes(tenant, decoded, tenant.retired_id)
    read = [dst.read_subject(s) for s in result.subjects.values()]
    assert {None if subject is None else subject.mode for subject in read} == {"READWRITE"}

    again = migrate_schemas(source(), dst, settings(tenant, "preserve"), topics)
    assert (again.registered, again.diff) == (0, [])


def test_preserve_into_apicurio_fails_up_front_and_writes_nothing(tenant):
    dst = registry(srtb.REMAP.url, "apicurio-remap")
    topics = {t: f"pv.{t}" for t in tenant.topics.values()}
    before = dst.subjects()
    with pytest.raises(SchemaMigrationError, match=r"preserve mode needs a destination that keeps requested ids"
                                                   r".*'apicurio-remap'.*answered id \d+ when asked for id \d+"):
        migrate_schemas(source(), dst, settings(tenant, "preserve"), topics)
    assert dst.subjects() == before


def test_a_conflict_is_refused_naming_subject_version_and_ids_with_nothing_written(tenant):
    dst = registry(srtb.REMAP.url, "apicurio-remap")
    topics = {t: f"cf.{t}" for t in tenant.topics.values()}
    clash = f"cf.{tenant.topics['payments']}-value"
    clash_id = dst.register(clash, '{"type":"record","name":"Other","fields":[]}', "AVRO", ())
    before = {s: dst.read_subject(s) for s in dst.subjects()}
    with pytest.raises(SchemaMigrationError) as info:
        migrate_schemas(source(), dst, settings(tenant, "remap"), topics)
    assert f"subject '{clash}' version 1" in str(info.value)
    assert f"destination id {clash_id}" in str(info.value) and "nothing was written" in str(info.value)
    assert {s: dst.read_subject(s) for s in dst.subjects()} == before


class CutAfter(SchemaRegistry):
    """Test seam: the real client, but the network to the registry is cut before the n-th registration."""

    def __init__(self, conn, proxy, n):
        super().__init__(conn)
        self.proxy, self.left = proxy, n

    def register(self, *args, **kwargs):
        self.left -= 1
        if self.left == 0:
            self.proxy.cut()
        return super().register(*args, **kwargs)


def test_registry_down_mid_run_fails_clearly_and_a_rerun_completes(tenant):
    topics = {t: f"dn.{t}" for t in tenant.topics.values()}
    path = srtb.CCOMPAT_PATH
    proxy = CuttableProxy(srtb.REMAP.port)
    down = CutAfter(registry(f"http://127.0.0.1:{proxy.port}{path}", "apicurio-flaky").conn, proxy, 6)
    with pytest.raises(SchemaRegistryUnavailable, match=r"schema registry 'apicurio-flaky' .*register 'dn\."):
        migrate_schemas(source(), down, settings(tenant, "remap"), topics)
    dst = registry(srtb.REMAP.url, "apicurio-remap")
    rerun = migrate_schemas(source(), dst, settings(tenant, "remap"), topics)
    assert rerun.registered > 0
    assert_same_subjects(source(), dst, rerun.subjects, same_ids=False)
    assert migrate_schemas(source(), dst, settings(tenant, "remap"), topics).registered == 0


def test_the_dag_tasks_migrate_schemas_then_copy_records_with_destination_ids_and_reconcile(
        tenant, clusters, tmp_path, monkeypatch):
    """`migrate_schemas` as the DAG runs it: registries from registry connections, topics from the spec.

    The source's connection has the type's first name `schema_registry`, the destination's the registered name
    `schemaregistry`: a connection made before the rename keeps working (core.specs.connection_types)."""
    for conn_id, url, conn_type in (("kf_sr_op_src", srtb.SOURCE.url, "schema_registry"),
                                    ("kf_sr_op_dst", srtb.REMAP.url, "schemaregistry")):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": conn_type, "host": url}))
    spec_path = Path(write_spec(tmp_path, clusters, tenant.prefix))
    spec_path.write_text(spec_path.read_text() + yaml.safe_dump({"schema_registry": {
        "source_connection_id": "kf_sr_op_src", "destination_connection_id": "kf_sr_op_dst", "mode": "remap",
        "subjects_include": [re.escape(tenant.audit_subject)]}}))
    task = MigrateSchemasOperator(task_id="migrate_schemas", spec_path=str(spec_path))
    dst = registry(srtb.REMAP.url, "apicurio-remap")
    orders_value = f"{tenant.topics['orders']}-value"

    planned = MigrateSchemasOperator(task_id="migrate_schemas", spec_path=str(spec_path), dry_run="True").execute(
        {"run_id": "dry"})
    assert planned["dry_run"] and any(orders_value in line for line in planned["diff"])
    assert dst.read_subject(orders_value) is None  # a dry run writes nothing

    first = task.execute({"run_id": "r1"})
    assert first["registered"] > 0 and orders_value in first["subjects"]
    assert_same_subjects(source(), dst, first["subjects"], same_ids=False)
    store = MigrationStateStore(clusters.cluster("destination"), load_spec(spec_path).state_topic_name)
    stored = store.read_kind(SCHEMA_ID_KIND)
    assert {int(k): v["destination_id"] for k, v in stored.items()} == {int(k): v for k, v in first["id_map"].items()}
    assert {v["run_id"] for v in stored.values()} == {"r1"}

    again = task.execute({"run_id": "r2"})
    assert (again["registered"], again["diff"], again["id_map"]) == (0, [], first["id_map"])
    assert {v["run_id"] for v in store.read_kind(SCHEMA_ID_KIND).values()} == {"r1"}  # nothing rewritten

    # A consumer group of the tenant stopped part-way through two of its topics: translated after the rewrite.
    orders, payments = tenant.topics["orders"], tenant.topics["payments"]
    group = f"{tenant.prefix}-billing"
    stopped_at = {(orders, 0): 5, (orders, 1): 9, (payments, 0): 12, (payments, 1): 0}
    commit_source_group(clusters, group, stopped_at)

    # The copy batch then writes every record with its destination id, and only that changes.
    provision(str(spec_path))
    provision_groups(str(spec_path))
    run_batch(str(spec_path), clusters.SPARK_CONN)
    before = decode_all(tenant, clusters, srtb.SOURCE.url)
    after = decode_all(tenant, clusters, srtb.REMAP.url, side="destination")
    id_map = {int(k): v for k, v in first["id_map"].items()}
    for topic, values in before.items():
        assert sorted(json.dumps(v, sort_keys=True) for _, v in after[topic]) == sorted(
            json.dumps(v, sort_keys=True) for _, v in values), topic
        assert {i for i, _ in after[topic]} == {id_map[i] for i, _ in values} != {i for i, _ in values}, topic
    spec = load_spec(spec_path)
    source_cluster, destination_cluster = clusters.cluster("source"), clusters.cluster("destination")
    assert reconcile(spec, source_cluster, destination_cluster, store).ok  # source ids mapped before comparing
    copies = load_partition_copies(spec, source_cluster, destination_cluster, read_progress(store))
    assert not reconcile_copies(source_cluster, destination_cluster, copies.values()).ok  # byte for byte they differ

    # Translation works on offsets and provenance, never on payloads: the group resumes on the destination at
    # exactly the record it stopped at on the source, over the rewritten records.
    translated = translate_migration(spec, source_cluster, destination_cluster, store)
    assert not translated.flagged
    outcomes = commit_translated_offsets(destination_cluster, translated.decisions, strict=True)
    assert all(not o.refused and not o.skipped for o in outcomes)
    source_records = {topic: read_source_records(clusters, topic) for topic in (orders, payments)}
    for topic in (orders, payments):
        resumed = consume_as_group(clusters, group, topic, 2)
        for q in range(2):
            expected = sorted(m.offset() for m in source_records[topic]
                              if m.partition() == q and m.offset() >= stopped_at[(topic, q)])
            assert resumed[q] == expected, (topic, q, stopped_at[(topic, q)])

    # The decode check: every record the batch wrote decodes on the destination against the destination registry.
    check_registry = registry(srtb.REMAP.url, "apicurio-remap")
    check = check_decoding(destination_cluster, check_registry, store, "b1")
    assert check.failed == 0, check.describe_failures()
    for role in SERIALIZED:
        tally = check.topics[tenant.topics[role]]
        assert (tally.records, tally.values_decoded, tally.failed) == (25, 25, 0), role
        assert tally.keys_decoded == (25 if role == "orders" else 0), role
    assert check.topics[tenant.topics["events"]].schema_types == {"JSON": 25}
    assert check.topics[tenant.topics["pings"]].schema_types == {"PROTOBUF": 25}
    assert check_decoding(destination_cluster, check_registry, store, "b1").topics == {}  # nothing checked twice

    # A record that never decoded on the source (a registered id, a cut body) is copied as it is, and the check
    # names it: its topic, partition, offset and destination id.
    source_id = schema_id_of(read_source_records(clusters, orders)[0].value())
    assert source_id is not None
    producer = clusters.producer("source")
    producer.produce(orders, value=with_schema_id(b"\x00" * 5, source_id) + b"\x02", partition=1)
    assert producer.flush(30) == 0
    run_batch(str(spec_path), clusters.SPARK_CONN)
    check = check_decoding(destination_cluster, check_registry, store, "b2")
    assert check.failed == 1 and check.topics[orders].records == 1
    (failure,) = check.failures
    assert (failure["topic"], failure["partition"], failure["field"], failure["schema_id"]) == (
        orders, 1, "value", id_map[source_id])
    assert failure["offset"] >= 12 and "AVRO payload does not decode" in failure["reason"]
    marks = {k: v for k, v in store.read_kind(DECODE_CHECK_KIND).items() if v["destination_topic"] == orders}
    assert sum(m["failed"] for m in marks.values()) == 1 and sum(m["records"] for m in marks.values()) == 26
    check_registry.close()


def test_the_decode_check_reads_protobuf_schemas_as_a_registry_rewrites_them(tenant):
    """Apicurio stores .proto text in its own layout, and a serializer's descriptor as base64: both are read."""
    src = registry(srtb.SOURCE.url, "apicurio-source")
    subject = src.read_subject(f"{tenant.topics['pings']}-value")
    assert subject is not None
    text_version, descriptor_version = subject.versions[1], subject.versions[2]  # v3: the serializer's own
    stored = src.registered_schema(text_version.schema_id)
    assert stored is not None
    assert stored.schema_type == "PROTOBUF" and top_level_messages(stored.schema) == 1
    serialized = src.registered_schema(descriptor_version.schema_id)
    assert serialized is not None and serialized_descriptor(serialized.schema) is not None
    checker = PayloadChecker(src.registered_schema)
    ping = bytes([0x08, 0x07, 0x12, 0x02]) + b"me"  # seq = 7, from = "me"
    for version in (text_version, descriptor_version):
        assert checker.check(with_schema_id(b"\x00" * 5, version.schema_id) + b"\x00" + ping).outcome == "decoded"
        assert checker.check(with_schema_id(b"\x00" * 5, version.schema_id) + b"\x02\x02" + ping).outcome == "failed"
    assert src.registered_schema(2_000_000_000) is None
    src.close()
