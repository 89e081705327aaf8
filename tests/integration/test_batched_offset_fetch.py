"""The batched OffsetFetch (``kafka.offset_fetch``: one FindCoordinator v4 and one OffsetFetch v8 per coordinator for
all groups) answers exactly what the client's one-group-per-request path answers, on the test bed's 3.9 source and
4.3 destination, over PLAINTEXT and over the SASL_SSL/SCRAM listener (the test bed's CA, host names checked).

One set of ~30 groups per cluster, committed once through kafka-ferry's own client (a group over 13 partitions of two
topics, one with empty metadata, groups with and without metadata, one that exists without any commit, one id that
does not exist), then several reads against it: the batched read, the client's path, the values committed, the call
counts (one OffsetFetch for all groups on the 1-broker cluster, no per-group request), and a config the batched
read does not take falls back to the client's path with the same answer. Groups and topics deleted at the end.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.kafka import call_count
from kafka_ferry.kafka.acls import create_acls, delete_acls, upsert_scram_user
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.errors import KafkaClusterError

pytestmark = [pytest.mark.integration]

GROUPS = 28  # committed ones; with the commit-less group and the missing id: 30 ids


def _one_per_request(cluster: KafkaCluster, group_ids: list[str]) -> dict:
    return cluster._groups_offsets_one_per_request(sorted(group_ids))


@pytest.fixture(scope="module", params=["source", "destination"])
def tenant(request, clusters):
    """Topics and ~30 groups on one side, their expected committed (offset, metadata); deleted afterwards."""
    side = request.param
    spec = clusters.tb.SOURCE if side == "source" else clusters.tb.DESTINATION
    cluster = KafkaCluster(side, {"bootstrap.servers": spec.bootstrap})
    wide, narrow = clusters.unique("obf-wide"), clusters.unique("obf-narrow")
    clusters.create_topic(side, wide, 12)
    clusters.create_topic(side, narrow, 1)
    prefix = clusters.unique("obf")
    expected: dict[str, dict[tuple[str, int], tuple[int, str]]] = {}
    for i in range(GROUPS):
        if i == 0:  # every partition of both topics
            offsets = {**{(wide, p): 100 + p for p in range(12)}, (narrow, 0): 7}
        else:
            offsets = {(wide, i % 12): i, (narrow, 0): 1000 + i} if i % 3 else {(wide, i % 12): i}
        metadata = {tp: ("" if i == 1 else f"m-{i}-{tp[1]}") for tp in offsets} if i % 2 else None
        expected[f"{prefix}-{i:02d}"] = {tp: (o, (metadata or {}).get(tp, "")) for tp, o in offsets.items()}
    failures = cluster.alter_groups_offsets({g: ({tp: o for tp, (o, _) in parts.items()},
                                                 {tp: m for tp, (_, m) in parts.items()})
                                             for g, parts in expected.items()})
    assert not any(failures.values()), failures
    # a group that exists without any commit: joined, assigned, left without committing
    empty = f"{prefix}-empty"
    consumer = Consumer({"bootstrap.servers": spec.bootstrap, "group.id": empty, "enable.auto.commit": False,
                         "auto.offset.reset": "latest"})
    try:
        consumer.subscribe([narrow])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the commit-less group was never assigned its partition"
    finally:
        consumer.close()
    expected[empty] = {}
    expected[f"{prefix}-never-existed"] = {}
    yield side, spec, cluster, expected, wide
    admin = clusters.admin(side)
    for future in admin.delete_consumer_groups([g for g in expected if not g.endswith("never-existed")],
                                               request_timeout=30).values():
        future.result(30)
    for future in admin.delete_topics([wide, narrow], operation_timeout=30).values():
        future.result(30)


def test_the_batched_read_answers_what_the_client_answers_in_one_request(tenant):
    side, _spec, cluster, expected, _wide = tenant
    ids = list(expected)
    before = call_count.snapshot()
    batched = cluster.groups_offsets_with_metadata(ids)
    calls = call_count.since(before)
    assert calls == {"wire.ApiVersions": 1, "wire.FindCoordinator": 1, "wire.OffsetFetch": 1}, (side, calls)
    assert batched == expected
    # group by group, the client's own path, counted as one request per group
    before = call_count.snapshot()
    client = _one_per_request(cluster, ids)
    assert call_count.since(before) == {"admin.list_consumer_group_offsets": len(ids)}
    for group in ids:
        assert batched[group] == client[group], group
    assert cluster.groups_offsets([ids[0]]) == {ids[0]: {tp: o for tp, (o, _) in expected[ids[0]].items()}}


def test_over_sasl_ssl_with_scram_the_same(tenant, clusters):
    side, spec, _cluster, expected, _wide = tenant
    tb = clusters.tb
    secure = KafkaCluster(f"{side}-secure", tb.sasl_client_config(spec, tb.ADMIN_USER, tb.admin_password(spec)))
    before = call_count.snapshot()
    batched = secure.groups_offsets_with_metadata(expected)
    calls = call_count.since(before)
    assert batched == expected
    assert calls["wire.OffsetFetch"] == 1 and calls["wire.FindCoordinator"] == 1, calls
    # SCRAM: a handshake and two authenticate rounds per connection (the coordinator's may be a second one)
    assert calls["wire.SaslHandshake"] in (1, 2) and calls["wire.SaslAuthenticate"] == 2 * calls["wire.SaslHandshake"]
    assert not any(k.startswith("admin.") for k in calls), calls


def test_a_config_the_batched_read_does_not_take_keeps_the_clients_path(tenant, caplog):
    side, spec, _cluster, expected, _wide = tenant
    odd = KafkaCluster(f"{side}-odd", {"bootstrap.servers": spec.bootstrap, "socket.keepalive.enable": True})
    before = call_count.snapshot()
    with caplog.at_level("INFO", logger="kafka_ferry.kafka.cluster"):
        assert odd.groups_offsets_with_metadata(expected) == expected
        assert odd.groups_offsets_with_metadata(list(expected)[:2]) == dict(list(expected.items())[:2])
    calls = call_count.since(before)
    assert not any(k.startswith("wire.") for k in calls), calls
    assert calls["admin.list_consumer_group_offsets"] == len(expected) + 2
    said = [r.message for r in caplog.records if "one group per request" in r.message]
    assert len(said) == 1 and "socket.keepalive.enable" in said[0], said  # once per cluster object


def test_what_a_principal_may_not_read_is_answered_as_the_client_answers(tenant, clusters):
    """A SCRAM user with DESCRIBE on one group and one of its two topics: both paths answer that topic's offsets
    only; a group it may not DESCRIBE (its coordinator lookup refused) is read again through the client, which
    raises the authorization error it always raised."""
    side, spec, admin, expected, wide = tenant
    tb = clusters.tb
    user, password = clusters.unique("obf-user"), uuid.uuid4().hex
    allowed, stranger = sorted(expected)[0], sorted(expected)[2]
    upsert_scram_user(admin, user, password)
    entries = [AclEntry(f"User:{user}", "GROUP", allowed, "DESCRIBE"), AclEntry(f"User:{user}", "TOPIC", wide,
                                                                              "DESCRIBE")]
    create_acls(admin, entries)
    try:
        config = tb.sasl_client_config(spec, user, password)
        deadline = time.monotonic() + 30
        while True:  # a new SCRAM credential reaches the listener a moment after it is written
            try:
                KafkaCluster("probe", config).describe_cluster()
                break
            except KafkaClusterError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        reader = KafkaCluster(f"{side}-limited", config)
        before = call_count.snapshot()
        seen = reader.groups_offsets_with_metadata([allowed])
        calls = call_count.since(before)
        assert calls["wire.OffsetFetch"] == 1 and "admin.list_consumer_group_offsets" not in calls, calls
        assert seen == {allowed: {tp: v for tp, v in expected[allowed].items() if tp[0] == wide}}
        assert seen == reader._groups_offsets_one_per_request([allowed])
        before = call_count.snapshot()
        with pytest.raises(KafkaClusterError) as batched:
            reader.groups_offsets_with_metadata([allowed, stranger])
        calls = call_count.since(before)
        assert calls["wire.FindCoordinator"] == 1 and calls["admin.list_consumer_group_offsets"] == 1, calls
        with pytest.raises(KafkaClusterError) as client:
            reader._groups_offsets_one_per_request([allowed, stranger])
        assert batched.value.code == client.value.code == KafkaError.GROUP_AUTHORIZATION_FAILED
        assert str(batched.value) == str(client.value)
    finally:
        delete_acls(admin, entries)
        for future in admin.admin.alter_user_scram_credentials(
                [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)]).values():
            future.result(30)


def test_a_batched_read_that_fails_leaves_the_whole_call_to_the_client(tenant, caplog):
    """The first bootstrap address accepts a connection and closes it unanswered (not a Kafka broker): the batched
    read fails as a whole, said once at info without the config, and the client, which moves on to the next
    bootstrap address, answers every group; the next call does not try the batched read again (held off)."""
    side, spec, _cluster, expected, _wide = tenant
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def hang_up() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.recv(4096)
            conn.close()

    server = threading.Thread(target=hang_up, daemon=True)
    server.start()
    try:
        cluster = KafkaCluster(f"{side}-hung-up", {"bootstrap.servers": f"127.0.0.1:{port},{spec.bootstrap}",
                                                    "client.id": "secret-free"})
        before = call_count.snapshot()
        with caplog.at_level("INFO", logger="kafka_ferry.kafka.cluster"):
            assert cluster.groups_offsets_with_metadata(expected) == expected
            assert cluster.groups_offsets_with_metadata(expected) == expected
        calls = call_count.since(before)
        assert calls["wire.ApiVersions"] == 1 and "wire.OffsetFetch" not in calls, calls
        assert calls["admin.list_consumer_group_offsets"] == 2 * len(expected)
        said = [r.message for r in caplog.records if "batched group offset read failed" in r.message]
        assert len(said) == 1 and f"127.0.0.1:{port} closed the connection" in said[0], said
    finally:
        stop.set()
        server.join(10)
        listener.close()
