"""The fakes' contract: the in-memory cluster, state store and registry of ``tests/fakes`` answer as the real ones do.

Every test here runs twice (or three times for the registry): once on the fake, once on the real part of the test
bed (the destination brokers, a ``MigrationStateStore`` on them, the Apicurio and AxonOps registries), with the same
expected answers. A unit test that uses a fake relies on exactly these behaviours; a change that makes a fake
answer otherwise than Kafka or a registry fails here. Each side's scenario runs once (module-scoped fixtures) and
the tests read what it observed: a few seconds on the real side.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import ScramMechanism
from fakes.cluster import FakeCluster
from fakes.registry import FakeRegistry
from fakes.state import FakeStateStore

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.common.state_records import FENCE_KIND, GROUP_KIND, WRITTEN_AT, StateRecordError, decode
from kafka_ferry.kafka.acls import authorized_operations, create_acls, delete_acls, describe_acls, may_create_topic
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.kafka.reads import read_ranges
from kafka_ferry.registry.client import RegistryConnection, SchemaRegistry
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration

TOPIC_CONFIGS = {"retention.ms": "-1", "cleanup.policy": "delete"}
RECORDS = [(b"k0", b"v0"), (b"k1", b"v1"), (b"k0", None), (b"k3", b"v3")]


@dataclass
class Side:
    """One cluster and what a test does to it from outside kafka-ferry (retention, an application's consumer)."""

    cluster: Any
    truncate: Any  # (topic, partition, before) -> None
    join: Any  # (group, topic) -> a member handle
    leave: Any  # (member handle) -> None


def _fake_side() -> Side:
    fake = FakeCluster("destination")

    def join(group: str, topic: str) -> str:
        fake.join(group)
        return group

    return Side(fake, fake.truncate, join, fake.leave)


def _real_side(clusters) -> Side:
    def truncate(topic: str, partition: int, before: int) -> None:
        futures = clusters.admin("destination").delete_records([TopicPartition(topic, partition, before)])
        for future in futures.values():
            future.result(30)

    def join(group: str, topic: str):
        consumer = clusters.consumer("destination", group, **{"session.timeout.ms": 6000})
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the real consumer never joined its group"
        return consumer

    return Side(clusters.cluster("destination"), truncate, join, lambda consumer: consumer.close())


def _observe(side: Side) -> dict[str, Any]:
    """Run the scenario once on one side; what it saw, by name."""
    cluster = side.cluster
    seen: dict[str, Any] = {}
    topic, missing = f"contract-{uuid.uuid4().hex[:8]}", f"contract-missing-{uuid.uuid4().hex[:8]}"
    group, busy, idle = (f"contract-{name}-{uuid.uuid4().hex[:8]}" for name in ("g", "busy", "idle"))
    seen["created"] = [cluster.create_topic(topic, 2, 1, TOPIC_CONFIGS), cluster.create_topic(topic, 2, 1, {})]
    info = cluster.describe_topics([topic, missing])
    seen["described"] = {n: (i.partitions, i.configs.get("cleanup.policy"), i.configs.get("retention.ms"))
                         for n, i in info.items()}
    seen["partitions"] = cluster.partitions_of([topic, missing])
    seen["listed"] = topic in cluster.list_topic_names() and missing not in cluster.list_topic_names()
    before_ms = int(time.time() * 1000) - 1
    seen["produced"] = cluster.produce_and_wait(topic, RECORDS, partition=0)
    tps = [(topic, 0), (topic, 1)]
    seen["offsets"] = (cluster.list_offsets(tps, "earliest"), cluster.list_offsets(tps, "latest"))
    seen["read"] = [(m.offset(), m.key(), m.value()) for m in read_ranges(cluster, {(topic, 0): (1, 4)})]
    seen["by_time"] = cluster.list_offsets([(topic, 0)], "time", timestamp_ms=before_ms)
    side.truncate(topic, 0, 2)
    seen["after_retention"] = (cluster.list_offsets([(topic, 0)], "earliest"),
                               [m.offset() for m in read_ranges(cluster, {(topic, 0): (2, 4)})])
    with pytest.raises(KafkaClusterError) as no_topic:
        cluster.list_offsets([(missing, 0)], "latest")
    seen["missing_offsets_error"] = no_topic.value.code
    cluster.alter_group_offsets(group, {(topic, 0): 3, (topic, 1): 0}, metadata={(topic, 0): "from-contract"})
    seen["committed"] = (cluster.groups_offsets_with_metadata([group, idle]), cluster.group_offsets(group))
    seen["described_groups"] = {g: (i.state, i.member_count, i.is_active)
                                for g, i in cluster.describe_groups([group, idle]).items()}
    member = side.join(busy, topic)
    try:
        busy_info = cluster.describe_groups([busy])[busy]
        seen["busy"] = (busy_info.member_count, busy_info.is_active)
        outcome = cluster.alter_groups_offsets({busy: ({(topic, 0): 1}, None), group: ({(topic, 0): 4}, None)})
        seen["busy_commit"] = {g: None if e is None else type(e).__name__ for g, e in outcome.items()}
        seen["busy_offsets"] = cluster.groups_offsets([busy, group])
    finally:
        side.leave(member)
    seen["group_ids"] = {group, busy} <= set(cluster.list_group_ids())
    return seen


@pytest.fixture(scope="module", params=["fake", "real"])
def seen(request) -> dict[str, Any]:
    side = _fake_side() if request.param == "fake" else _real_side(request.getfixturevalue("clusters"))
    observed = _observe(side)
    observed["topic"] = next(iter(observed["described"]))
    return observed


def test_a_topic_is_created_once_and_described_with_its_configs(seen):
    topic = seen["topic"]
    assert seen["created"] == [True, False]  # the second create finds it: a retried run
    assert seen["described"] == {topic: (2, "delete", "-1")}  # a missing topic is left out
    assert seen["partitions"] == [(topic, 0), (topic, 1)] and seen["listed"]


def test_a_log_has_a_start_and_an_end_and_keeps_every_record_in_order(seen):
    topic = seen["topic"]
    assert seen["produced"] == len(RECORDS)
    assert seen["offsets"] == ({(topic, 0): 0, (topic, 1): 0}, {(topic, 0): 4, (topic, 1): 0})
    assert seen["read"] == [(1, b"k1", b"v1"), (2, b"k0", None), (3, b"k3", b"v3")]  # a tombstone is a record
    assert seen["by_time"] == {(topic, 0): 0}


def test_retention_moves_the_log_start_and_a_missing_topic_has_no_offsets(seen):
    topic = seen["topic"]
    assert seen["after_retention"] == ({(topic, 0): 2}, [2, 3])
    assert seen["missing_offsets_error"] is not None


def test_committed_offsets_keep_their_metadata_and_an_unknown_group_has_none(seen):
    topic = seen["topic"]
    with_metadata, plain = seen["committed"]
    group = next(g for g, offsets in with_metadata.items() if offsets)
    idle = next(g for g in with_metadata if g != group)
    assert with_metadata[group] == {(topic, 0): (3, "from-contract"), (topic, 1): (0, "")}
    assert plain == {(topic, 0): 3, (topic, 1): 0} and with_metadata[idle] == {}
    assert seen["described_groups"][group] == ("EMPTY", 0, False)
    assert seen["described_groups"][idle][1:] == (0, False)  # DEAD on both; its name differs by nothing we read
    assert seen["group_ids"]


def test_a_group_with_a_live_member_is_active_and_refuses_a_commit_while_the_others_commit(seen):
    topic = seen["topic"]
    assert seen["busy"] == (1, True)
    busy = next(g for g, e in seen["busy_commit"].items() if e is not None)
    group = next(g for g in seen["busy_commit"] if g != busy)
    assert seen["busy_commit"] == {busy: "KafkaClusterError", group: None}
    assert seen["busy_offsets"] == {busy: {}, group: {(topic, 0): 4, (topic, 1): 0}}


# --- the state store --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["fake", "real"])
def store_seen(request) -> dict[str, Any]:
    topic = f"contract-state-{uuid.uuid4().hex[:8]}"
    if request.param == "fake":
        store: MigrationStateStore = FakeStateStore(topic=topic)
    else:
        store = MigrationStateStore(request.getfixturevalue("clusters").cluster("destination"), topic)
    seen: dict[str, Any] = {"unwritten": store.read_all(), "exists": topic in store.cluster.list_topic_names()}
    seen["created"] = [store.ensure_topic(), store.ensure_topic()]
    # read after every write: the real store then reads only what was appended since its last read
    seen["reads"] = []
    store.put_many(FENCE_KIND, {"a": {"entries": [1]}, "b": {"entries": [1]}})
    seen["reads"].append(_unstamped(store.read_all()))
    store.put(FENCE_KIND, "a", {"entries": [2]})
    seen["reads"].append(_unstamped({FENCE_KIND: store.read_kind(FENCE_KIND)}))
    store.put(FENCE_KIND, "b", None)
    seen["reads"].append(_unstamped(store.read_all()))
    store.put(GROUP_KIND, "g", {"source_topics": ["t"]})
    seen["all"], seen["fences"] = _unstamped(store.read_all()), _unstamped({FENCE_KIND: store.read_kind(FENCE_KIND)})
    fresh = type(store)(store.cluster, topic) if request.param == "real" else store
    seen["fresh"] = _unstamped(fresh.read_all())
    with pytest.raises(TypeError):
        store.put("fence", "x", {"entries": []})  # type: ignore[arg-type]
    with pytest.raises(StateRecordError, match="field entries is missing"):
        store.put_many(FENCE_KIND, {"c": {"entries": []}, "d": {}})
    seen["after_refusal"] = _unstamped(store.read_all())
    return seen


def _unstamped(state: dict) -> dict:
    """The state without each record's write time (the only field that differs between two runs)."""
    return {kind: {k: {f: v for f, v in value.items() if f != WRITTEN_AT} for k, value in records.items()}
            for kind, records in state.items()}


def test_the_state_store_keeps_the_newest_value_per_key_and_a_tombstone_deletes(store_seen):
    assert store_seen["unwritten"] == {} and store_seen["exists"] is False  # reading created nothing
    assert store_seen["created"] == [True, False]
    assert store_seen["reads"] == [{FENCE_KIND: {"a": {"entries": [1]}, "b": {"entries": [1]}}},
                                   {FENCE_KIND: {"a": {"entries": [2]}, "b": {"entries": [1]}}},
                                   {FENCE_KIND: {"a": {"entries": [2]}}}]
    assert store_seen["fresh"] == store_seen["all"]  # a read from the log start agrees with the reads forward
    assert store_seen["fences"] == {FENCE_KIND: {"a": {"entries": [2]}}}
    assert store_seen["all"] == {FENCE_KIND: {"a": {"entries": [2]}}, GROUP_KIND: {"g": {"source_topics": ["t"]}}}
    # an undeclared kind, or one record of many without its fields, is refused before any record is written
    assert store_seen["after_refusal"] == store_seen["all"]


def test_a_read_after_a_write_reads_only_the_records_appended_since_the_last_read(clusters, monkeypatch):
    import kafka_ferry.state.store as store_module

    topic = f"contract-state-{uuid.uuid4().hex[:8]}"
    store = MigrationStateStore(clusters.cluster("destination"), topic)
    store.ensure_topic()
    store.put_many(GROUP_KIND, {f"g{i}": {"source_topics": [f"t{i}"]} for i in range(50)})
    store.put(FENCE_KIND, "a", {"entries": [1]})
    assert len(store.read_kind(GROUP_KIND)) == 50
    decoded: list[bytes] = []

    def counting(key: bytes, value: bytes | None) -> tuple[str, str, dict[str, Any] | None]:
        decoded.append(key)
        return decode(key, value)

    monkeypatch.setattr(store_module, "decode", counting)
    store.put_many(GROUP_KIND, {"g0": None, "g50": {"source_topics": ["t50"]}})
    forward = _unstamped(store.read_all())
    assert sorted(decoded) == [b"group/g0", b"group/g50"]
    assert set(forward[GROUP_KIND]) == {f"g{i}" for i in range(1, 51)}
    assert forward[FENCE_KIND] == {"a": {"entries": [1]}}
    decoded.clear()
    assert _unstamped(MigrationStateStore(store.cluster, topic).read_all()) == forward and len(decoded) == 53


# --- the schema registry ----------------------------------------------------------------------------------------

AVRO_V1 = {"type": "record", "name": "Contract", "namespace": "kf", "fields": [{"name": "a", "type": "string"}]}
AVRO_V2 = {**AVRO_V1, "fields": [*AVRO_V1["fields"], {"name": "b", "type": "string", "default": ""}]}
AVRO_V3 = {**AVRO_V1, "name": "Imported"}


@pytest.fixture(scope="module", params=["fake", "apicurio", "axonops"])
def registry_seen(request) -> dict[str, Any]:
    if request.param == "fake":
        registry: Any = FakeRegistry()
    else:
        import schema_registries as sr

        spec = sr.REMAP if request.param == "apicurio" else sr.PRESERVE
        registry = SchemaRegistry(RegistryConnection(f"contract-{request.param}", spec.url))
    prefix = f"contract-{uuid.uuid4().hex[:8]}"
    subject, other, imported = f"{prefix}-value", f"{prefix}-other-value", f"{prefix}-imported-value"
    v1, v2, v3 = json.dumps(AVRO_V1), json.dumps(AVRO_V2), json.dumps(AVRO_V3)
    seen: dict[str, Any] = {"subject": subject, "other": other}
    try:
        seen["own_level_before"] = registry.subject_compatibility(subject)
        first = registry.register(subject, v1, "AVRO", ())
        seen["again"] = registry.register(subject, v1, "AVRO", ()) == first
        second = registry.register(subject, v2, "AVRO", ())
        seen["ids_differ"] = second != first
        seen["other_same_id"] = registry.register(other, v1, "AVRO", ()) == first
        read = registry.read_subject(subject)
        seen["versions"] = [(v.version, v.schema_id == first, v.deleted) for v in read.versions]
        seen["by_id"] = registry.schema_by_id(first)[0], json.loads(registry.schema_by_id(first)[1]) == AVRO_V1
        seen["versions_of_id"] = [(s == subject, s == other, n, d) for s, n, d in registry.versions_of_id(second)]
        registry.set_compatibility(subject, "FULL")
        seen["own_level_after"] = registry.subject_compatibility(subject)
        registry.soft_delete(subject, 2)
        seen["after_soft_delete"] = [(v.version, v.deleted) for v in registry.read_subject(subject).versions]
        seen["deleted_of_id"] = [d for _, _, d in registry.versions_of_id(second)]
        if request.param != "apicurio":  # the remap registry: its ccompat API takes an id but serves it not by id
            wanted = 700_000 + uuid.uuid4().int % 100_000
            registry.set_mode(imported, "IMPORT")
            seen["imported"] = registry.register_with_id(imported, 3, wanted, v3, "AVRO", ()) == wanted
            seen["imported_read"] = [(v.version, v.schema_id == wanted)
                                     for v in registry.read_subject(imported).versions]
            seen["imported_by_id"] = json.loads(registry.schema_by_id(wanted)[1]) == AVRO_V3
            registry.set_mode(imported, "READWRITE")
    finally:
        for name in (subject, other, imported):
            registry.delete_subject_permanently(name)
    seen["gone"] = registry.read_subject(subject), subject in registry.subjects()
    if hasattr(registry, "close"):
        registry.close()
    return seen


def test_the_registry_answers_ids_versions_levels_and_deletes_alike(registry_seen):
    seen = registry_seen
    assert seen["own_level_before"] is None  # a new subject follows the global level
    assert seen["again"] and seen["ids_differ"]  # the same schema again: its id, no new version
    assert seen["other_same_id"]  # the same schema under another subject keeps its id
    assert seen["versions"] == [(1, True, False), (2, False, False)]
    assert seen["by_id"] == ("AVRO", True)
    assert seen["versions_of_id"] == [(True, False, 2, False)]
    assert seen["own_level_after"] == "FULL"
    assert seen["after_soft_delete"] == [(1, False), (2, True)] and seen["deleted_of_id"] == [True]
    if "imported" not in seen:
        return  # Apicurio: the remap registry of the test bed, never a preserve migration's destination
    # IMPORT mode: the id and version asked for are the ones registered (what a preserve migration relies on)
    assert seen["imported"] and seen["imported_read"] == [(3, True)] and seen["imported_by_id"]
    assert seen["gone"] == (None, False)


# --- the authorizer: what a principal may do (KIP-430 answers, a validate-only CreateTopics, ACL listing) -------


def _rights(admin: Any, user: Any, prefix: str) -> dict[str, Any]:
    """Grants to ``user``'s principal made through ``admin`` (a super user), then what ``user`` is told it may do."""
    principal = user.principal
    mine, other, hidden, group, stranger = (f"{prefix}-mine", f"{prefix}-other", f"contract-hidden-{prefix}",
                                            f"{prefix}-g", f"contract-stranger-{prefix}")
    for topic in (mine, other, hidden):
        admin.create_topic(topic, 1, 1, {})
    entries = [AclEntry(principal, "TOPIC", mine, "READ"), AclEntry(principal, "TOPIC", mine, "ALTER_CONFIGS"),
               AclEntry(principal, "TOPIC", prefix, "WRITE", pattern_type="PREFIXED"),
               AclEntry(principal, "TOPIC", mine, "WRITE", permission="DENY"),
               AclEntry(principal, "GROUP", group, "DESCRIBE")]
    create_acls(admin, entries)
    seen: dict[str, Any] = {"listed": [t.replace(prefix, "P") for t in user.list_topic_names()
                                       if t in (mine, other, hidden)],
                            "acls": describe_acls(admin, principal=principal) == sorted(entries),
                            "matching": len(describe_acls(admin, "TOPIC", mine, pattern_type="MATCH"))}
    ops = authorized_operations(user, "TOPIC", [mine, other, hidden])
    seen["topics"] = {n.replace(prefix, "P"): sorted(o or ()) for n, o in ops.items()}
    seen["group"] = sorted(authorized_operations(user, "GROUP", [group])[group] or ())
    with pytest.raises(KafkaClusterError) as refused:
        authorized_operations(user, "GROUP", [stranger])
    seen["stranger"] = refused.value.code
    seen["create_before"] = may_create_topic(user, f"{prefix}-new") is not None
    cluster_create = AclEntry(principal, "CLUSTER", "kafka-cluster", "CREATE")
    create_acls(admin, [cluster_create])
    seen["create_after"] = may_create_topic(user, f"{prefix}-new")
    seen["not_created"] = f"{prefix}-new" not in admin.list_topic_names()  # validate-only: nothing created
    delete_acls(admin, [*entries, cluster_create])
    seen["left"] = describe_acls(admin, principal=principal)
    return seen


@pytest.fixture(scope="module", params=["fake", "real"])
def rights_seen(request) -> dict[str, Any]:
    prefix = f"contract-{uuid.uuid4().hex[:8]}"
    if request.param == "fake":
        fake = FakeCluster("destination")
        return _rights(fake, fake.as_principal("User:" + prefix), prefix)
    from confluent_kafka.admin import UserScramCredentialDeletion

    import kafka_testbed as tb
    from kafka_ferry.kafka.acls import upsert_scram_user
    from kafka_ferry.kafka.cluster import KafkaCluster

    admin = request.getfixturevalue("clusters").cluster("destination")
    password = uuid.uuid4().hex
    upsert_scram_user(admin, prefix, password)
    try:
        user = KafkaCluster("contract-user", tb.sasl_client_config(tb.DESTINATION, prefix, password))
        deadline = time.monotonic() + 30
        while True:  # a new SCRAM credential reaches every listener a moment after it is written
            try:
                user.describe_cluster()
                break
            except KafkaClusterError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        return _rights(admin, user, prefix)
    finally:
        for future in admin.admin.alter_user_scram_credentials(
                [UserScramCredentialDeletion(prefix, ScramMechanism.SCRAM_SHA_512)]).values():
            future.result(30)


def test_the_authorizer_answers_a_principal_s_rights_alike(rights_seen):
    seen = rights_seen
    assert seen["acls"] and seen["matching"] == 4  # the literal ones on the topic and the prefixed one
    assert seen["listed"] == ["P-mine", "P-other"]  # a topic it may not DESCRIBE is not in its metadata
    assert seen["topics"] == {"P-mine": ["ALTER_CONFIGS", "DESCRIBE", "DESCRIBE_CONFIGS", "READ"],  # DENY WRITE wins
                              "P-other": ["DESCRIBE", "WRITE"]}  # the prefixed grant, DESCRIBE implied
    assert seen["group"] == ["DESCRIBE"]
    assert seen["stranger"] == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert seen["create_before"] and seen["create_after"] is None and seen["not_created"]
    assert seen["left"] == []
