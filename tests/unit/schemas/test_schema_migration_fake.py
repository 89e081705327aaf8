"""``schemas.schemas.migrate_schemas`` between two in-memory registries (``tests/fakes/registry.py``, whose ids,
versions, soft deletes and levels answer as the test bed's registries do, ``test_fakes_contract.py``): what a remap
and a preserve migration register, the id map, and that a dry run and a complete rerun write nothing."""

from __future__ import annotations

import json

import pytest
from fakes.registry import FakeRegistry

from kafka_ferry.core.specs.spec import SchemaRegistryRef

ADDRESS = {"type": "record", "name": "Address", "namespace": "acme", "fields": [{"name": "city", "type": "string"}]}
ADDRESS_2 = {**ADDRESS, "fields": [*ADDRESS["fields"], {"name": "zip", "type": "string", "default": ""}]}
PING = {"type": "record", "name": "Ping", "namespace": "acme", "fields": [{"name": "n", "type": "long"}]}


def settings(mode: str) -> SchemaRegistryRef:
    return SchemaRegistryRef(source_connection_id="sr_src", destination_connection_id="sr_dst", mode=mode)


@pytest.fixture
def source() -> FakeRegistry:
    """orders-value with two versions (the second soft-deleted), pings-value with one and a level of its own."""
    registry = FakeRegistry("http://source.invalid", first_id=10)
    registry.register("orders-value", json.dumps(ADDRESS), "AVRO", ())
    registry.register("orders-value", json.dumps(ADDRESS_2), "AVRO", ())
    registry.soft_delete("orders-value", 2)
    registry.register("pings-value", json.dumps(PING), "AVRO", ())
    registry.set_compatibility("pings-value", "FULL")
    return registry


def test_a_remap_registers_every_version_and_maps_each_source_id_and_a_rerun_writes_nothing(source):
    from kafka_ferry.schemas.schemas import migrate_schemas

    destination = FakeRegistry("http://destination.invalid", first_id=500)
    topics = {"orders": "orders", "pings": "pings"}
    stored: list[dict[int, int]] = []
    dry = migrate_schemas(source, destination, settings("remap"), topics, dry_run=True)
    assert destination.subjects() == [] and dry.registered == 0  # a dry run changes nothing
    result = migrate_schemas(source, destination, settings("remap"), topics, store_id_map=stored.append)
    assert result.registered == 3 and sorted(result.id_map) == [10, 11, 12]
    assert all(dst >= 500 for dst in result.id_map.values()) and stored == [result.id_map]
    orders = destination.read_subject("orders-value")
    assert orders is not None
    assert [(v.version, v.deleted) for v in orders.versions] == [(1, False), (2, True)]  # arrives soft-deleted
    assert destination.subject_compatibility("pings-value") == "FULL"
    again = migrate_schemas(source, destination, settings("remap"), topics, store_id_map=stored.append)
    assert again.registered == 0 and again.id_map == result.id_map


def test_a_preserve_migration_keeps_ids_and_versions(source):
    from kafka_ferry.schemas.schemas import migrate_schemas

    destination = FakeRegistry("http://destination.invalid", first_id=500)
    result = migrate_schemas(source, destination, settings("preserve"), {"orders": "orders", "pings": "pings"})
    assert result.id_map == {10: 10, 11: 11, 12: 12}
    orders = destination.read_subject("orders-value")
    assert orders is not None
    assert [(v.version, v.schema_id) for v in orders.versions] == [(1, 10), (2, 11)]
    assert orders.mode is None  # IMPORT mode left again
