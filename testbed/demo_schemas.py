"""`make demo`'s schema registries and the demo tenant's Avro schemas.

The demo tenant's values are Avro, written with confluent-kafka's AvroSerializer against a source registry;
its spec migrates them in remap mode. Two AxonOps registries (in memory, ready in well under a second) play
the tenant's two registries: the destination one already serves another team (a `platform.audit-value`
subject registered first), so the destination assigns other ids than the source and the copy rewrites them
in every record. The decode check after the batch then proves each copied record decodes against the
destination registry.

Ports 18181/18182 (KFERRY_DEMO_SR_SOURCE_PORT / _DESTINATION_PORT) sit below Linux's ephemeral range, so a
client socket never holds one when the demo starts. Both registries live only while the demo runs:
`registries()` starts them and stops them (by pid) on exit. In memory, a registry starts empty each time;
registering the same schemas in the same order gives the same ids, which `check_seeded_ids` confirms
against the records already on the source before anything runs.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable, Iterator

import schema_registries as srtb

SOURCE = srtb.RegistrySpec("demo-source", "axonops", srtb._port("KFERRY_DEMO_SR_SOURCE_PORT", 18181))
DESTINATION = srtb.RegistrySpec("demo-destination", "axonops",
                                srtb._port("KFERRY_DEMO_SR_DESTINATION_PORT", 18182))
CONNECTIONS = {"schema_registry_source": SOURCE, "schema_registry_destination": DESTINATION}

MONEY_SUBJECT = "demo.Money"  # a shared type, referenced by both value schemas (pulled in by the migration)
MONEY = {"type": "record", "name": "Money", "namespace": "demo",
         "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}]}
VALUE_SCHEMAS = {
    "demo.orders": {"type": "record", "name": "Order", "namespace": "demo",
                    "fields": [{"name": "order_id", "type": "string"}, {"name": "n", "type": "int"},
                               {"name": "amount", "type": "demo.Money"}]},
    "demo.payments": {"type": "record", "name": "Payment", "namespace": "demo",
                      "fields": [{"name": "order_id", "type": "string"}, {"name": "amount", "type": "demo.Money"},
                                 {"name": "status", "type": {"type": "enum", "name": "Status",
                                                             "symbols": ["PENDING", "SETTLED"]}}]},
}
PLATFORM_SUBJECT = "platform.audit-value"  # the destination registry's own, older tenant
PLATFORM = {"type": "record", "name": "Audit", "namespace": "platform", "fields": [{"name": "who", "type": "string"}]}
SERIALIZER_CONF = {"auto.register.schemas": False, "use.latest.version": True, "subject.name.strategy.type": "TOPIC"}


@contextlib.contextmanager
def registries() -> Iterator[None]:
    """Both demo registries up (built once, cached like the Kafka jars), stopped on the way out."""
    srtb.build((SOURCE,))
    try:
        for spec in (SOURCE, DESTINATION):
            srtb.start(spec)
        for spec in (SOURCE, DESTINATION):
            srtb.wait_ready(spec)
        for conn_id, spec in CONNECTIONS.items():
            os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps({"conn_type": "schemaregistry",
                                                                         "host": spec.url})
        yield
    finally:
        for spec in (SOURCE, DESTINATION):
            srtb.stop(spec)


def _client(spec: srtb.RegistrySpec):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": spec.url})


def register() -> dict[str, int]:
    """The tenant's subjects on the source registry and the other team's on the destination; source ids."""
    from confluent_kafka.schema_registry import Schema, SchemaReference

    source = _client(SOURCE)
    ids = {MONEY_SUBJECT: source.register_schema(MONEY_SUBJECT, Schema(json.dumps(MONEY), "AVRO"))}
    refs = [SchemaReference("demo.Money", MONEY_SUBJECT, 1)]
    for topic, schema in VALUE_SCHEMAS.items():
        ids[f"{topic}-value"] = source.register_schema(f"{topic}-value", Schema(json.dumps(schema), "AVRO", refs))
    _client(DESTINATION).register_schema(PLATFORM_SUBJECT, Schema(json.dumps(PLATFORM), "AVRO"))
    return ids


def _order(p: int, i: int) -> dict:
    return {"order_id": f"o-{p}-{i}", "n": i, "amount": {"cents": 100 + i, "currency": "EUR"}}


def _payment(p: int, i: int) -> dict:
    return {"order_id": f"o-{p}-{i % 500}", "amount": {"cents": 100 + i, "currency": "EUR"},
            "status": "SETTLED" if i % 3 else "PENDING"}


VALUES = {"demo.orders": _order, "demo.payments": _payment}


def _serialize(serializer, ctx, make, p: int, i: int) -> bytes:
    return serializer(make(p, i), ctx)


def value_writers() -> dict[str, Callable[[int, int], bytes]]:
    """Per demo topic: (partition, i) -> the Avro value, in the wire format, as the tenant's producers write it."""
    from confluent_kafka.schema_registry import Schema, SchemaReference
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client, refs = _client(SOURCE), [SchemaReference("demo.Money", MONEY_SUBJECT, 1)]
    return {topic: functools.partial(_serialize, AvroSerializer(client, Schema(json.dumps(schema), "AVRO", refs),
                                                                conf=SERIALIZER_CONF),
                                     SerializationContext(topic, MessageField.VALUE), VALUES[topic])
            for topic, schema in VALUE_SCHEMAS.items()}


def check_seeded_ids(bootstrap: str, ids: dict[str, int]) -> None:
    """The records already on the source carry the ids the registry just assigned (same schemas, same order)."""
    from confluent_kafka import Consumer, TopicPartition

    from kafka_ferry.core.schemas.schema_wire import schema_id_of

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-seed-check", "enable.auto.commit": False})
    try:
        for topic in VALUE_SCHEMAS:
            consumer.assign([TopicPartition(topic, 0, 0)])
            msg = consumer.poll(30)
            if msg is None or msg.error():
                raise SystemExit(f"{topic}: cannot read its first record to check its schema id")
            found, wanted = schema_id_of(msg.value()), ids[f"{topic}-value"]
            if found != wanted:
                raise SystemExit(f"{topic}: its records carry schema id {found}, the demo registry assigned "
                                 f"{wanted}: the topics come from an older demo; `make clean`, then `make demo`")
    finally:
        consumer.close()
