"""Which configs the batched OffsetFetch takes (the rest keep the client's one-group-per-request path), and the
metadata text it answers, character for character what the client's path answers."""

from __future__ import annotations

import logging
import socket
import threading
from contextlib import contextmanager

import pytest

from kafka_ferry.core.offsets.offset_fetch_wire import CommittedOffset
from kafka_ferry.kafka.cluster import _wire_metadata
from kafka_ferry.kafka.offset_fetch import (
    BatchedFailed,
    BatchedUnavailable,
    Settings,
    read_groups_offsets,
    unsupported,
)

SCRAM = {"bootstrap.servers": "b:9094", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
         "sasl.username": "u", "sasl.password": "s3cret-value", "ssl.ca.location": "/tmp/ca.pem"}


@pytest.mark.parametrize("config", [
    {"bootstrap.servers": "b:9092"},
    {"bootstrap.servers": "PLAINTEXT://b:9092,c", "client.id": "x", "enable.auto.commit": False},
    {"bootstrap.servers": "b:9093", "security.protocol": "ssl", "ssl.ca.location": "/ca.pem",
     "ssl.certificate.location": "/c.pem", "ssl.key.location": "/k.pem", "ssl.key.password": "kp",
     "ssl.endpoint.identification.algorithm": "none"},
    {"bootstrap.servers": "b:9093", "security.protocol": "SSL", "enable.ssl.certificate.verification": "true"},
    {"bootstrap.servers": "b:9094", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
     "sasl.username": "u", "sasl.password": ""},
    SCRAM,
])
def test_configs_it_reaches_as_librdkafka_would(config):
    assert unsupported(config) is None


@pytest.mark.parametrize(("change", "why"), [
    ({"sasl.mechanism": "OAUTHBEARER"}, "sasl.mechanism 'OAUTHBEARER'"),
    ({"sasl.mechanism": "GSSAPI"}, "sasl.mechanism 'GSSAPI'"),
    ({"sasl.mechanism": None, "sasl.mechanisms": None}, "'GSSAPI'"),  # librdkafka's default mechanism
    ({"security.protocol": "SASL_SSL_X"}, "security.protocol 'SASL_SSL_X'"),
    ({"sasl.username": ""}, "sasl.username or sasl.password is not set"),
    ({"ssl.key.pem": "-----BEGIN"}, "ssl.key.pem"),
    ({"ssl.keystore.location": "/ks.p12"}, "ssl.keystore.location"),
    ({"ssl.providers": "legacy"}, "ssl.providers"),
    ({"enable.ssl.certificate.verification": "false"}, "enable.ssl.certificate.verification"),
    ({"sasl.oauthbearer.config": "x"}, "sasl.oauthbearer.config"),
    ({"sasl.kerberos.keytab": "/k"}, "sasl.kerberos.keytab"),
    ({"socket.keepalive.enable": True}, "socket.keepalive.enable"),
    ({"ssl.endpoint.identification.algorithm": "ldap"}, "'ldap' is not https or none"),
    ({"ssl.ca.location": "probe"}, "probe"),
    ({"bootstrap.servers": ""}, "bootstrap.servers is not set"),
])
def test_configs_it_leaves_to_the_client_say_why_without_secrets(change, why):
    config = {k: v for k, v in {**SCRAM, **change}.items() if v is not None}
    reason = unsupported(config)
    assert reason is not None and why in reason
    assert "s3cret-value" not in reason


def test_settings_keep_secrets_out_of_repr_and_check_host_names_by_default():
    settings = Settings.of({**SCRAM, "ssl.ca.location": None})
    assert settings.mechanism == "SCRAM-SHA-512" and settings.tls is not None and settings.tls.check_hostname
    assert "s3cret-value" not in repr(settings)
    unchecked = Settings.of({**SCRAM, "ssl.ca.location": None, "ssl.endpoint.identification.algorithm": "none"})
    assert unchecked.tls is not None and not unchecked.tls.check_hostname
    plain = Settings.of({"bootstrap.servers": "b:9092"})
    assert plain.tls is None and plain.mechanism is None


def test_metadata_text_is_the_clients(caplog):
    def text(raw: bytes | None) -> str:
        return _wire_metadata("g", CommittedOffset("t", 3, 5, -1, raw, 0))

    assert text(b"keep-me") == "keep-me"
    assert text(b"keep-me\0") == "keep-me"  # librdkafka's commits end in a NUL; the client reads up to it
    assert text(b"") == "" and text(None) == ""
    assert text("é".encode()) == "é"
    with caplog.at_level(logging.INFO, logger="kafka_ferry.kafka.cluster"):
        assert text(b"\xff\x01binary") == ""
    assert "group g t-3: committed metadata is not UTF-8" in caplog.text


@contextmanager
def answering(reply: bytes):
    """A local listener that reads one request and answers ``reply`` (bytes written out by hand), then hangs up."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(reply)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.join(10)
        listener.close()


def test_a_broker_before_kafka_3_is_unavailable_for_batching():
    # ApiVersions v0 answer, correlation 1: OffsetFetch (9) up to v7, FindCoordinator (10) up to v3 (Kafka 2.8)
    body = bytes.fromhex("00000001 0000 00000002 0009 0000 0007 000a 0000 0003".replace(" ", ""))
    with answering(len(body).to_bytes(4, "big") + body) as address:
        with pytest.raises(BatchedUnavailable, match="OffsetFetch up to v7 and FindCoordinator up to v3"):
            read_groups_offsets({"bootstrap.servers": address}, ["g"], 10.0)


@pytest.mark.parametrize(("reply", "why"), [
    (bytes.fromhex("0000000a 00000001 0000"), "closed the connection"),  # 10 bytes promised, 6 sent
    (bytes.fromhex("00000006 00000002 0000"), "correlation id 2, the request had 1"),
    (bytes.fromhex("00000006 00000001 0000"), r"'api_keys' count \(INT32\) truncated"),
    (bytes.fromhex("80000000"), "response size -2147483648"),
])
def test_a_malformed_answer_fails_the_batched_read_clearly(reply, why):
    with answering(reply) as address:
        with pytest.raises(BatchedFailed, match=why):
            read_groups_offsets({"bootstrap.servers": address}, ["g"], 10.0)
