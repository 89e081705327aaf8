"""The in-memory fakes of ``tests/fakes`` implement the protocols the stages are written against, call for call.

Why: a unit test on a fake proves something about the code only if the fake takes the calls the real part takes.
``make typecheck`` checks the assignments below (a fake missing a member, or taking a call the protocol's signature
does not fit, fails it); this test checks at run time that every method each protocol declares is there with the
same parameters (on the real implementations too) and every attribute on the fakes.
``tests/integration/test_fakes_contract.py`` holds the fakes' answers to the real brokers' and registries'.
"""

from __future__ import annotations

import inspect

import pytest
from fakes.cluster import FakeCluster
from fakes.registry import FakeRegistry
from fakes.state import FakeStateStore

from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.registry.client import SchemaRegistry
from kafka_ferry.registry.protocol import Registry
from kafka_ferry.state.protocol import StateStore
from kafka_ferry.state.store import MigrationStateStore

cluster: Cluster = FakeCluster("destination")
store: StateStore = FakeStateStore()
registry: Registry = FakeRegistry()


def methods(protocol: type) -> dict[str, inspect.Signature]:
    """Each method the protocol declares, with its signature (attributes and properties: see the instances below)."""
    return {name: inspect.signature(value) for name, value in vars(protocol).items()
            if not name.startswith("_") and inspect.isfunction(value)}


def attributes(protocol: type) -> list[str]:
    """Each attribute or property the protocol declares."""
    return sorted({*getattr(protocol, "__annotations__", {}),
                   *(n for n, v in vars(protocol).items() if isinstance(v, property))})


@pytest.mark.parametrize(("protocol", "implementations"), [
    (Cluster, (FakeCluster, KafkaCluster)),
    (StateStore, (FakeStateStore, MigrationStateStore)),
    (Registry, (FakeRegistry, SchemaRegistry)),
], ids=["cluster", "state-store", "registry"])
def test_every_method_a_protocol_declares_is_implemented_with_its_parameters(protocol, implementations):
    declared = methods(protocol)
    assert declared, protocol
    for implementation in implementations:
        for name, signature in declared.items():
            got = inspect.signature(getattr(implementation, name))
            assert list(got.parameters) == list(signature.parameters), (implementation.__name__, name, got)


@pytest.mark.parametrize(("protocol", "fake"), [(Cluster, cluster), (StateStore, store), (Registry, registry)],
                         ids=["cluster", "state-store", "registry"])
def test_every_attribute_a_protocol_declares_is_on_the_fake(protocol, fake):
    declared = attributes(protocol)
    assert declared, protocol
    assert [name for name in declared if not hasattr(fake, name)] == []


def test_the_fakes_are_instances_the_stages_accept():
    assert cluster.describe_cluster().cluster_id == "destination-id"
    assert store.read_all() == {} and store.topic == "kafka-ferry.test.state"
    assert registry.subjects() == []
