"""Schema migration test support: the three registries, a seeded source tenant, a cuttable TCP proxy, a promoted
remap-mode migration and the checks of its rollback.

The seeded tenant (≥ 20 subjects, all names under one unique prefix) has Avro subjects with references across
subjects and several versions, a soft-deleted version that records use (a retired version: every fifth order
was written with it before it was soft-deleted), Protobuf and JSON Schema subjects, per-subject levels and
subjects without their own level (they follow the source's global BACKWARD, which Apicurio answers as NONE
unless asked with defaultToGlobal=true), and a RecordNameStrategy subject; its Avro, JSON Schema and Protobuf
topics on the source cluster hold records written by confluent-kafka's serializers against the source registry
(the Protobuf serializer registers its schema as a serialized descriptor, as producers that auto-register do).
"""

from __future__ import annotations

import io
import json
import socket
import struct
import threading
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import fastavro
import yaml
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from scenarios import (
    BASE_TS,
    commit_source_group,
    consume_some,
    provision,
    provision_groups,
    read_on_as_group,
    read_partition,
    remaining,
    write_spec,
)

from kafka_ferry.core.offsets.provenance import read_provenance, user_headers
from kafka_ferry.core.schemas.schema_wire import schema_id_of, with_schema_id
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.operators.schemas import MigrateSchemasOperator
from kafka_ferry.promotion.rollback import RollbackRunner
from kafka_ferry.promotion.steps import PromotionRunner
from kafka_ferry.registry.client import RegistryConnection, SchemaRegistry

ADDRESS_V1 = {"type": "record", "name": "Address", "namespace": "acme",
              "fields": [{"name": "city", "type": "string"}]}
ADDRESS_V2 = {**ADDRESS_V1, "fields": [*ADDRESS_V1["fields"], {"name": "zip", "type": "string", "default": ""}]}
MONEY = {"type": "record", "name": "Money", "namespace": "acme",
         "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}]}


def order(version: int) -> dict:
    fields = [{"name": "id", "type": "string"}, {"name": "to", "type": "acme.Address"},
              {"name": "total", "type": "acme.Money"}]
    fields += [{"name": f"note{i}", "type": "string", "default": ""} for i in range(1, version)]
    return {"type": "record", "name": "Order", "namespace": "acme", "fields": fields}


EVENT = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Event", "type": "object",
         "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}}, "required": ["kind"]}
PROTO = 'syntax = "proto3";\npackage acme;\n\nmessage Ping {\n  int32 seq = 1;\n%s}\n'
@cache
def ping_class():
    """The Ping message of a third version (PROTO's second plus `bool urgent = 3`), as a generated class would be
    (no protoc here): its serializer registers it as the subject's third version."""
    field = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="acme/ping.proto", package="acme", syntax="proto3")
    ping = fdp.message_type.add(name="Ping")
    ping.field.add(name="seq", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    ping.field.add(name="from", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    ping.field.add(name="urgent", number=3, type=field.TYPE_BOOL, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Ping"))


AUDIT = {"type": "record", "name": "Audit", "namespace": "acme.audit", "fields": [{"name": "who", "type": "string"}]}


@dataclass
class Tenant:
    prefix: str
    topics: dict[str, str]  # role -> source topic
    records: dict[str, int] = field(default_factory=dict)  # topic -> records produced
    retired: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # topic -> (partition, offset) of v3
    retired_id: int = 0  # the source id of the soft-deleted version those records carry

    @property
    def audit_subject(self) -> str:
        return f"{self.prefix}.acme.audit.Audit"


def registry(url: str, name: str) -> SchemaRegistry:
    return SchemaRegistry(RegistryConnection(name, url))


# confluent-kafka 2.16 defaults to the ASSOCIATED strategy: one `associations` request per record, which Apicurio
# 3.3.3 answers 404, and once left the request after it unanswered until the test timed out. The tenant's
# subjects are topic-named.
BY_TOPIC = {"subject.name.strategy.type": "TOPIC"}


def seed_tenant(source_url: str, clusters, prefix: str) -> Tenant:
    """Register the tenant's subjects on the source registry and produce serialized records to its topics."""
    sr = SchemaRegistryClient({"url": source_url})
    topics = {role: f"{prefix}.{role}" for role in ("orders", "payments", "events", "pings")}
    subject = {role: f"{t}-value" for role, t in topics.items()}
    address, money = f"{prefix}.acme.Address", f"{prefix}.acme.Money"
    sr.set_compatibility(None, "NONE")  # while seeding (an earlier tenant left BACKWARD); BACKWARD again at the end

    def avro(subj, schema, refs=()):
        return sr.register_schema(subj, Schema(json.dumps(schema), "AVRO", list(refs)))

    avro(address, ADDRESS_V1)
    avro(address, ADDRESS_V2)
    avro(money, MONEY)
    refs = [SchemaReference("acme.Address", address, 2), SchemaReference("acme.Money", money, 1)]
    for v in (1, 2, 3):
        retired_id = avro(subject["orders"], order(v), refs)
    sr.delete_version(subject["orders"], 3)  # soft-deleted, after records used it (RETIRED_EVERY below)
    avro(f"{topics['orders']}-key", {"type": "string"})
    pay = {"type": "record", "name": "Payment", "namespace": "acme",
           "fields": [{"name": "amount", "type": "acme.Money"}]}
    pay_refs = [SchemaReference("acme.Money", money, 1)]
    avro(subject["payments"], pay, pay_refs)
    sr.register_schema(subject["events"], Schema(json.dumps(EVENT), "JSON"))
    sr.register_schema(subject["events"], Schema(json.dumps({**EVENT, "description": "v2"}), "JSON"))
    sr.register_schema(subject["pings"], Schema(PROTO % "", "PROTOBUF"))
    sr.register_schema(subject["pings"], Schema(PROTO % "  string from = 2;\n", "PROTOBUF"))
    avro(f"{prefix}.acme.audit.Audit", AUDIT)  # RecordNameStrategy subject, selected by regex
    for i in range(12):  # more topics with their own compatibility level
        t = f"{prefix}.t{i}"
        topics[f"t{i}"] = t
        avro(f"{t}-value", {"type": "record", "name": f"T{i}", "fields": [{"name": "x", "type": "int"}]})
        sr.set_compatibility(f"{t}-value", ("BACKWARD", "FORWARD", "FULL", "NONE")[i % 4])
    sr.set_compatibility(subject["orders"], "BACKWARD_TRANSITIVE")
    sr.set_compatibility(address, "FULL_TRANSITIVE")

    tenant = Tenant(prefix, topics)
    conf = {"auto.register.schemas": False, "use.latest.version": True, **BY_TOPIC}
    producer = clusters.producer("source", **{"enable.idempotence": True})
    writers = {
        "orders": (AvroSerializer(sr, Schema(json.dumps(order(2)), "AVRO", refs), conf=conf),
                   lambda i: {"id": f"o{i}", "to": {"city": "Lyon", "zip": "69"},
                              "total": {"cents": i, "currency": "EUR"}, "note1": "n"}),
        "payments": (AvroSerializer(sr, Schema(json.dumps(pay), "AVRO", pay_refs), conf=conf),
                     lambda i: {"amount": {"cents": i, "currency": "EUR"}}),
        "events": (JSONSerializer(json.dumps({**EVENT, "description": "v2"}), sr, conf=conf),
                   lambda i: {"kind": "k", "n": i}),
    }
    # confluent-kafka's Protobuf serializer registers its own schema, a serialized descriptor (not .proto text):
    # Apicurio stores it as such, as the subject's third version (it cannot look a descriptor up by .proto text).
    writers["pings"] = (ProtobufSerializer(ping_class(), sr, {"auto.register.schemas": True, **BY_TOPIC}),
                        lambda i: ping_class()(seq=i, urgent=i % 3 == 0, **{"from": f"p{i}"}))
    key_serializer = AvroSerializer(sr, '"string"', conf=conf)
    retired = retired_writer(retired_id)
    for role, (serializer, make) in writers.items():
        topic = clusters.create_topic("source", topics[role], partitions=2)
        for i in range(25):
            key = key_serializer(f"k{i}", SerializationContext(topic, MessageField.KEY)) if role == "orders" else None
            if role == "orders" and i % RETIRED_EVERY == 0:  # written while version 3 was current
                record = make(i)
                assert isinstance(record, dict)  # an Avro record of orders
                value = retired({**record, "note2": "retired"})
                tenant.retired[topic] = [*tenant.retired.get(topic, []), (i % 2, i // 2)]
            else:
                value = serializer(make(i), SerializationContext(topic, MessageField.VALUE))
            producer.produce(topic, key=key, value=value, partition=i % 2)
        tenant.records[topic] = 25
    assert producer.flush(30) == 0
    tenant.retired_id = retired_id
    sr.set_compatibility(None, "BACKWARD")  # the global level the subjects without their own follow
    return tenant


RETIRED_EVERY = 5


def retired_writer(schema_id: int):
    """Avro values of orders version 3 in the wire format (as its serializer wrote them before it was retired)."""
    named: dict = {}
    for ref in (ADDRESS_V2, MONEY):
        fastavro.parse_schema(ref, named_schemas=named)
    schema = fastavro.parse_schema(order(3), named_schemas=named)

    def write(value: dict) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, value)
        return with_schema_id(b"\0" * 5, schema_id) + out.getvalue()

    return write


class CuttableProxy:
    """A TCP forwarder onto a registry that can be cut: then every connection and new connect fails."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.is_cut = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.is_cut:
                client.close()
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self):
        self.is_cut = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not
        except OSError:
            pass
        self.listener.close()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass


# --- a promoted remap migration and its rollback (test_rollback_remap.py, faults/test_rollback_kills.py) ----------

REMAP_PARTITIONS = 2
ACCOUNT = {"type": "record", "name": "Account", "namespace": "acme",
           "fields": [{"name": "owner", "type": "string"}, {"name": "balance", "type": "long"}]}
ACCOUNT_V2 = {**ACCOUNT, "fields": [*ACCOUNT["fields"], {"name": "branch", "type": "string", "default": "hq"}]}


def long_key(n: int) -> bytes:
    return struct.pack(">q", n)


def remap_migration(clusters, tmp_path, monkeypatch, axon_pair, names=("accounts",), group: bool = True) -> dict:
    """Topics ``<p>.<name>`` with Avro values (subject `<topic>-value` on the source registry, none for keys: long
    keys), migrated in remap mode (every id changes: the destination registry holds other schemas first) and
    provisioned, not promoted; with ``group``, a group `<p>-g` committed mid-way on the first topic (``topic``)."""
    source_reg, destination_reg = axon_pair
    p = clusters.unique("rbsr")
    topics = [f"{p}.{n}" for n in names]
    account = json.dumps({**ACCOUNT, "doc": p})  # this test's own content: a registry shares ids by content
    with SchemaRegistryClient({"url": source_reg.url}) as source_sr, \
            SchemaRegistryClient({"url": destination_reg.url}) as destination_sr:
        source_id = {source_sr.register_schema(f"{t}-value", Schema(account, "AVRO")) for t in topics}.pop()
        for i in range(3):  # the destination registry's next id is above the source's: the id changes
            other = {"type": "record", "name": f"Other{i}", "doc": p, "fields": [{"name": "x", "type": "int"}]}
            if destination_sr.register_schema(f"{p}.other{i}-value", Schema(json.dumps(other), "AVRO")) > source_id:
                break
        conf = {"auto.register.schemas": False, "use.latest.version": True, **BY_TOPIC}
        serialize = AvroSerializer(source_sr, account, conf=conf)
        producer = clusters.producer("source", **{"enable.idempotence": True})
        for topic in topics:
            clusters.create_topic("source", topic, partitions=REMAP_PARTITIONS)
            for i in range(10):
                value = serialize({"owner": f"s{i}", "balance": i}, SerializationContext(topic, MessageField.VALUE))
                producer.produce(topic, key=long_key(i), value=value, partition=i % REMAP_PARTITIONS,
                                 timestamp=BASE_TS + i)
        assert producer.flush(30) == 0
    m_group = f"{p}-g" if group else None
    if m_group:
        commit_source_group(clusters, m_group, {(topics[0], q): 3 for q in range(REMAP_PARTITIONS)})

    conns = {"source": f"kf_rbsr_src_{p}", "destination": f"kf_rbsr_dst_{p}"}
    for side, spec in (("source", source_reg), ("destination", destination_reg)):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conns[side].upper()}",
                           json.dumps({"conn_type": "schemaregistry", "host": spec.url}))
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
            "group": m_group, "source_id": source_id, "destination_id": id_map[source_id],
            "work_dir": tmp_path / "work", "source_url": source_reg.url, "destination_url": destination_reg.url,
            "account": account}


def promoted_remap_migration(clusters, tmp_path, monkeypatch, axon_pair) -> dict:
    """One such topic and its group, the migration promoted."""
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
        for q in range(REMAP_PARTITIONS):
            assert {schema_id_of(r.value) for r in read_partition(clusters, "destination", topic, q)} == {
                m["destination_id"]}, f"{topic}-{q}"


def produce_remap_on_destination(clusters, m, schema: str, tag: str, count: int, topic: str | None = None) -> None:
    """After the cutover: Avro values written with the destination registry's ids, long keys whose bytes 1-4 are the
    destination id (a rewrite of the key would change them), headers, a tombstone; to ``topic`` (default: the
    first)."""
    topic = topic or m["topic"]
    producer = clusters.producer("destination", **{"enable.idempotence": True})
    with SchemaRegistryClient({"url": m["destination_url"]}) as sr:
        serialize = AvroSerializer(sr, schema, conf={"auto.register.schemas": False, "use.latest.version": True,
                                                     **BY_TOPIC})
        for i in range(count):
            value = serialize({"owner": f"{tag}{i}", "balance": 1000 + i},
                              SerializationContext(topic, MessageField.VALUE))
            producer.produce(topic, key=long_key((m["destination_id"] << 24) | i), value=value,
                             partition=i % REMAP_PARTITIONS, timestamp=BASE_TS + 10**6 + i,
                             headers=[("tag", tag.encode())])
    producer.produce(topic, key=long_key(-1), value=None, partition=0, timestamp=BASE_TS + 2 * 10**6)
    assert producer.flush(30) == 0


def remap_post_cutover(clusters, topic, source_cluster_id) -> dict[int, list]:
    """Per partition: the destination's committed records that were not copied from the source."""
    return {q: [r for r in read_partition(clusters, "destination", topic, q)
                if read_provenance(r.headers)[0] != source_cluster_id] for q in range(REMAP_PARTITIONS)}


def remap_rollback(clusters, m, **kwargs) -> RollbackRunner:
    return RollbackRunner(m["spec"], clusters.cluster("source"), clusters.cluster("destination"),
                          work_dir=m["work_dir"], quiesce_window_s=1.0, **kwargs)


def stop_remap_on_destination(clusters, m, per_partition: dict[int, int | None]) -> None:
    """The group reads ``per_partition`` records on the destination and stops there (consumers and producers are
    gone: the state a rollback starts from); records in ``m`` what the checks compare with: the post-cutover
    records, the source's own ones, and what the group has left to read, with the source's schema id (as the
    source must give it back)."""
    consume_some(clusters, "destination", m["group"], m["topic"], per_partition)
    m["ids"] = {side: clusters.cluster(side).describe_cluster().cluster_id for side in ("source", "destination")}
    m["post"] = remap_post_cutover(clusters, m["topic"], m["ids"]["source"])
    m["own_before"] = {q: read_partition(clusters, "source", m["topic"], q) for q in range(REMAP_PARTITIONS)}

    def with_source_id(value: bytes | None) -> bytes | None:
        if value is not None and schema_id_of(value) == m["destination_id"]:
            return with_schema_id(value, m["source_id"])
        return value

    m["expected"] = {q: [(k, with_source_id(v), h, ts) for k, v, h, ts in rows]
                     for q, rows in remaining(clusters, "destination", m["group"], m["topic"]).items()}


def assert_remap_rolled_back(clusters, m) -> int:
    """Every post-cutover record on the source once, in order, key/headers/timestamp as they were, values with the
    source's id decoding (source registry) to the destination's value (destination registry); the source's own
    records untouched; the group reads on from exactly where it stopped. Returns the values checked."""
    checked = assert_copied_back_with_source_ids(clusters, m, m["topic"], m["post"], m["own_before"], m["ids"])
    assert read_on_as_group(clusters, m["group"], m["topic"]) == m["expected"], "the group did not resume exactly"
    return checked


def assert_copied_back_with_source_ids(clusters, m, topic: str, post: dict, own_before: dict, ids: dict) -> int:
    """``topic``'s records produced on the destination (``post``, per partition) are on the source once, in order,
    after its own records (``own_before``, untouched): keys, timestamps and headers as they were, values with the
    source registry's id decoding there to the destination's value; returns how many values were checked."""
    with SchemaRegistryClient({"url": m["source_url"]}) as source_sr, \
            SchemaRegistryClient({"url": m["destination_url"]}) as destination_sr:
        decode_source, decode_destination = (AvroDeserializer(source_sr, conf=BY_TOPIC),
                                             AvroDeserializer(destination_sr, conf=BY_TOPIC))
        return sum(_check_copied_back(clusters, m, topic, q, post[q], own_before[q], ids["destination"],
                                      decode_source, decode_destination) for q in range(REMAP_PARTITIONS))


def _check_copied_back(clusters, m, topic: str, q: int, post: list, own_before: list, destination_id: str,
                       decode_source, decode_destination) -> int:
    """One partition of `assert_copied_back_with_source_ids`; returns the values checked."""
    ctx = SerializationContext(topic, MessageField.VALUE)
    checked = 0
    recs = read_partition(clusters, "source", topic, q)
    own = [r for r in recs if read_provenance(r.headers)[0] != destination_id]
    back = [r for r in recs if read_provenance(r.headers)[0] == destination_id]
    assert own == own_before  # the source's own records untouched
    assert len(back) == len(post) > 0, f"{topic}-{q}: not every record back once"
    for s, d in zip(back, post, strict=True):
        where = f"{topic}-{q}: destination offset {d.offset} -> source offset {s.offset}"
        assert s.key == d.key, f"{where}: the long key changed"  # plain binary key: byte for byte
        assert (s.timestamp, list(user_headers(s.headers))) == (d.timestamp, list(user_headers(d.headers))), where
        if d.value is None:
            assert s.value is None, where
            continue
        assert schema_id_of(d.value) == m["destination_id"]
        assert schema_id_of(s.value) == m["source_id"], f"{where}: id not mapped back"
        assert s.value is not None and s.value[5:] == d.value[5:], f"{where}: more than the id changed"
        assert decode_source(s.value, ctx) == decode_destination(d.value, ctx), where
        checked += 1
    return checked
