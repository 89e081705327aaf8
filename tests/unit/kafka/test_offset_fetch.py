"""Which configs the batched OffsetFetch takes (the rest keep the client's one-group-per-request path), and the
metadata text it answers, character for character what the client's path answers."""

from __future__ import annotations

import logging

import pytest

from kafka_ferry.core.offsets.offset_fetch_wire import CommittedOffset
from kafka_ferry.kafka.cluster import _wire_metadata
from kafka_ferry.kafka.offset_fetch import Settings, unsupported

SCRAM = {"bootstrap.servers": "b:9094", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
         "sasl.username": "u", "sasl.password": "s3cret-value", "ssl.ca.location": "/tmp/ca.pem"}


@pytest.mark.parametrize("config", [
    {"bootstrap.servers": "b:9092"},
    {"bootstrap.servers": "PLAINTEXT://b:9092,c", "client.id": "x", "enable.auto.commit": False},
    {"bootstrap.servers": "b:9093", "security.protocol": "ssl", "ssl.ca.location": "/ca.pem",
     "ssl.certificate.location": "/c.pem", "ssl.key.location": "/k.pem", "ssl.key.password": "kp",
     "ssl.endpoint.identification.algorithm": "none"},
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
