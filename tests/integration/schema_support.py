"""Schema migration test support: the three registries, a seeded source tenant, a cuttable TCP proxy.

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
import threading
from dataclasses import dataclass, field
from functools import cache

import fastavro
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kafka_ferry.core.schema_wire import with_schema_id
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
                value = retired({**make(i), "note2": "retired"})
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
