"""Remap mode rewrites only the fields a registry serializer wrote, on real registries and the real copy path.

A tenant's topic has 8-byte big-endian long keys (Java's LongSerializer: the first byte is 0x00 for any key
below 2^56) and Avro values. Half the keys have bytes 1-4 equal to a schema id the migration maps, the other
half to ids it does not. The source registry holds `<topic>-value` and no `<topic>-key`, so only values are
rewritten: every key must arrive byte-identical, every value with its destination id, decoding there. A second
topic has a `-value` subject yet values no registry serializer wrote: the spec's `serialized_fields` override
says `none`, and its values arrive byte-identical too.
"""

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
from scenarios import provision, provision_groups, read_partition, run_batch, write_spec
from schema_support import BY_TOPIC, registry

import schema_registries as srtb
from kafka_ferry.core.schemas.schema_wire import schema_id_of
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.operators.copy import PlanCopyBatchOperator
from kafka_ferry.operators.provision import MigrationPreflightOperator
from kafka_ferry.operators.schemas import MigrateSchemasOperator
from kafka_ferry.promotion.reconcile import reconcile
from kafka_ferry.schemas.decode_check import check_decoding
from kafka_ferry.state.serialized_fields import fields_by_destination
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration

PARTITIONS = 2
RECORDS = 40
ACCOUNT = {"type": "record", "name": "Account", "namespace": "acme",
           "fields": [{"name": "owner", "type": "string"}, {"name": "balance", "type": "long"}]}



def shown(payload: bytes | None) -> str:
    return "None" if payload is None else payload.hex()


def key_of(record) -> bytes:
    """A record's key, which every record of the keyed topic has."""
    assert record.key is not None, record
    return record.key

def long_key(n: int) -> bytes:
    return struct.pack(">q", n)


def test_remap_rewrites_avro_values_and_leaves_long_keys_and_overridden_fields_byte_identical(
        registries, clusters, tmp_path, monkeypatch):
    prefix = clusters.unique("sfk")
    accounts, raw = f"{prefix}.accounts", f"{prefix}.raw"
    sr = SchemaRegistryClient({"url": srtb.SOURCE.url})
    account = json.dumps({**ACCOUNT, "doc": prefix})  # this test's own content: registries share ids by content
    source_id = sr.register_schema(f"{accounts}-value", Schema(account, "AVRO"))
    raw_id = sr.register_schema(f"{raw}-value", Schema(json.dumps(  # a stale subject: raw's values are no Avro
        {"type": "record", "name": "Raw", "doc": prefix, "fields": [{"name": "b", "type": "bytes"}]}), "AVRO"))
    other_tenant = SchemaRegistryClient({"url": srtb.REMAP.url})  # the destination registry holds other schemas:
    for i in range(max(source_id, raw_id) + 2):  # its next ids are above the source's, so every id changes
        other = {"type": "record", "name": f"Other{i}", "doc": prefix, "fields": [{"name": "x", "type": "int"}]}
        if other_tenant.register_schema(f"{prefix}.other{i}-value", Schema(json.dumps(other), "AVRO")) > raw_id:
            break
    serializer = AvroSerializer(sr, account, conf={"auto.register.schemas": False, "use.latest.version": True,
                                                   **BY_TOPIC})
    producer = clusters.producer("source", **{"enable.idempotence": True})
    for topic in (accounts, raw):
        clusters.create_topic("source", topic, partitions=PARTITIONS)
    keys = []
    for i in range(RECORDS):
        mapped = (source_id, raw_id)[i % 4 // 2]
        # even i: bytes 1-4 are a mapped id (a rewrite would change them); odd i: ids nobody mapped (0, or a
        # large one), which `unknown_id_policy: fail` would refuse
        n = (mapped << 24) | i if i % 2 == 0 else (i * 7919 if i % 4 == 1 else (0x7FFFFF00 << 24) | i)
        key = long_key(n)
        assert key[0] == 0 and (schema_id_of(key) == mapped) == (i % 2 == 0)
        keys.append(key)
        value = serializer({"owner": f"o{i}", "balance": i * 100}, SerializationContext(accounts, MessageField.VALUE))
        producer.produce(accounts, key=key, value=value, partition=i % PARTITIONS)
        producer.produce(raw, key=key, value=long_key((raw_id << 24) | i), partition=i % PARTITIONS)
    producer.produce(accounts, key=long_key(-5), value=None, partition=0)  # 0xFF first byte, a tombstone
    assert producer.flush(30) == 0

    for conn_id, url in (("kf_sf_src", srtb.SOURCE.url), ("kf_sf_dst", srtb.REMAP.url)):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "schemaregistry",
                                                                          "host": url}))
    spec_path = Path(write_spec(tmp_path, clusters, prefix))
    spec_path.write_text(spec_path.read_text() + yaml.safe_dump({"schema_registry": {
        "source_connection_id": "kf_sf_src", "destination_connection_id": "kf_sf_dst", "mode": "remap",
        "unknown_id_policy": "fail", "serialized_fields": [{"topics": f"{prefix}\\.raw", "fields": "none"}]}}))

    preflight = MigrationPreflightOperator(task_id="pf", spec_path=str(spec_path)).execute({})
    assert f"{accounts}: value (source registry subject(s) {accounts}-value)" in preflight["serialized_fields"]
    assert any(line.startswith(f"{raw}: none (spec: serialized_fields[0]") for line in preflight["serialized_fields"])
    migrated = MigrateSchemasOperator(task_id="migrate_schemas", spec_path=str(spec_path)).execute({"run_id": "r1"})
    assert migrated["serialized_fields"][accounts]["fields"] == "value"
    assert f"{accounts}-value" in migrated["serialized_fields"][accounts]["reason"]
    assert migrated["serialized_fields"][raw]["fields"] == "none"
    assert "serialized_fields[0]" in migrated["serialized_fields"][raw]["reason"]
    id_map = {int(k): v for k, v in migrated["id_map"].items()}
    assert source_id in id_map and raw_id in id_map
    assert id_map[source_id] != source_id and id_map[raw_id] != raw_id

    provision(str(spec_path))
    provision_groups(str(spec_path))
    report = run_batch(str(spec_path), clusters.SPARK_CONN)
    assert report["status"] == "succeeded", report.get("error")

    deserialize = AvroDeserializer(SchemaRegistryClient({"url": srtb.REMAP.url}), conf=BY_TOPIC)
    source_deserialize = AvroDeserializer(sr, conf=BY_TOPIC)
    copied = 0
    for p in range(PARTITIONS):
        for topic in (accounts, raw):
            src = read_partition(clusters, "source", topic, p)
            dst = read_partition(clusters, "destination", topic, p)
            assert len(src) == len(dst) > 0, (topic, p)
            for s, d in zip(src, dst, strict=True):
                assert d.key == s.key, f"{topic}-{p}@{s.offset}: key {shown(s.key)} arrived as {shown(d.key)}"
                if topic == raw or s.value is None:
                    assert d.value == s.value, f"{topic}-{p}@{s.offset}: value changed"
                    continue
                assert schema_id_of(d.value) == id_map[source_id] and d.value is not None and d.value[5:] == s.value[5:]
                ctx = SerializationContext(topic, MessageField.VALUE)
                assert deserialize(d.value, ctx) == source_deserialize(s.value, ctx)
                copied += 1
    assert copied == RECORDS
    assert sorted(k for p in range(PARTITIONS)
                  for k in (key_of(r) for r in read_partition(clusters, "destination", accounts, p))) == sorted(
        [*keys, long_key(-5)])

    # The decode check and reconciliation apply the same decision: keys are not decoded, values are.
    spec = load_spec(spec_path)
    source_cluster, destination_cluster = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination_cluster, spec.state_topic_name)
    remap = registry(srtb.REMAP.url, "apicurio-remap")
    try:
        check = check_decoding(destination_cluster, remap, store, "b1", fields=fields_by_destination(spec, store))
    finally:
        remap.close()
    assert check.failed == 0, check.describe_failures()
    tally = check.topics[accounts]
    assert (tally.values_decoded, tally.keys_decoded, tally.serialized) == (RECORDS, 0, "value")
    assert (check.topics[raw].values_decoded, check.topics[raw].serialized) == (0, "none")
    assert reconcile(spec, source_cluster, destination_cluster, store).ok

    # A topic that appears after the schema migration ran has no decision: the plan refuses it, never guesses;
    # the next migrate_schemas decides it (no subject: byte for byte) and the copy goes on.
    late = clusters.create_topic("source", f"{prefix}.late", partitions=1)
    producer.produce(late, key=long_key(source_id << 24), value=long_key(source_id << 24))
    assert producer.flush(30) == 0
    provision(str(spec_path))
    with pytest.raises(AirflowFailException, match=f"'{late}'.*migrate_schemas"):
        PlanCopyBatchOperator(task_id="plan_copy", spec_path=str(spec_path)).execute({})
    again = MigrateSchemasOperator(task_id="migrate_schemas", spec_path=str(spec_path)).execute({"run_id": "r2"})
    assert again["serialized_fields"][late]["fields"] == "none"
    assert run_batch(str(spec_path), clusters.SPARK_CONN)["status"] == "succeeded"
    [copied_late] = read_partition(clusters, "destination", late, 0)
    assert (copied_late.key, copied_late.value) == (long_key(source_id << 24), long_key(source_id << 24))
