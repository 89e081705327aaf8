"""core.common.java_client_config: a connection's librdkafka settings as Kafka's Java client properties (the one Java
call, kafka.streams_groups). Every security setting is carried or refused by name, never dropped; values never appear in
an error; the properties file syntax cannot be broken by a value."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_ferry.core.common.java_client_config import UntranslatableConfig, java_properties, properties_text

PEM = {"/tls/client.pem": "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n",
       "/tls/client.key": "-----BEGIN PRIVATE KEY-----\nBBB\n-----END PRIVATE KEY-----\n"}


def test_plaintext_carries_only_the_bootstrap_and_protocol():
    assert java_properties({"bootstrap.servers": "b:9092", "client.id": "x", "socket.timeout.ms": 5},
                           PEM.__getitem__) == {"bootstrap.servers": "b:9092", "security.protocol": "PLAINTEXT"}


def test_sasl_ssl_scram_becomes_a_jaas_line_and_a_pem_trust_store():
    props = java_properties({"bootstrap.servers": "b:9094", "security.protocol": "sasl_ssl",
                             "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": 'u"s\\r',
                             "sasl.password": "p@ss", "ssl.ca.location": "/tls/ca.pem"}, PEM.__getitem__)
    assert props == {
        "bootstrap.servers": "b:9094", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="u\\"s\\\\r" password="p@ss";',
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/tls/ca.pem"}


def test_a_client_certificate_goes_inline_with_its_key_password():
    props = java_properties({"bootstrap.servers": "b:1", "security.protocol": "SSL",
                             "ssl.certificate.location": "/tls/client.pem", "ssl.key.location": "/tls/client.key",
                             "ssl.key.password": "kp", "ssl.endpoint.identification.algorithm": "none"},
                            PEM.__getitem__)
    assert props["ssl.keystore.type"] == "PEM"
    assert props["ssl.keystore.certificate.chain"] == PEM["/tls/client.pem"]
    assert props["ssl.keystore.key"] == PEM["/tls/client.key"]
    assert props["ssl.key.password"] == "kp"
    assert props["ssl.endpoint.identification.algorithm"] == ""


@pytest.mark.parametrize(("config", "named"), [
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "'sasl.mechanism' 'OAUTHBEARER'"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.oauthbearer.client.id": "c"},
     "'sasl.oauthbearer.client.id'"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "'sasl.mechanism' 'GSSAPI'"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "'sasl.username'"),
    ({"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"},
     "'enable.ssl.certificate.verification'"),
    ({"security.protocol": "SSL", "ssl.keystore.location": "/k.p12"}, "'ssl.keystore.location'"),
    ({"security.protocol": "SSL", "ssl.key.location": "/tls/client.key"}, "'ssl.certificate.location'"),
    ({"security.protocol": "KERBEROS"}, "'security.protocol' 'KERBEROS'"),
])
def test_a_security_setting_it_cannot_carry_is_refused_by_name_never_dropped(config, named):
    with pytest.raises(UntranslatableConfig) as refused:
        java_properties({"bootstrap.servers": "b:1", "sasl.password": "s3cret-value", **config}, PEM.__getitem__)
    assert named in str(refused.value)
    assert "s3cret-value" not in str(refused.value)


def test_properties_text_literal():
    assert properties_text({"b": "x=y:z", "a": " lead\\ #\n"}) == "a=\\ lead\\\\ \\#\\n\nb=x\\=y\\:z\n"


def _read_properties(text: str) -> dict[str, str]:
    """java.util.Properties.load for the subset properties_text writes (one logical line per entry)."""
    out = {}
    for line in text.split("\n")[:-1]:  # Java ends a line only at \n or \r (both escaped)
        key, value = re.fullmatch(r"((?:\\.|[^=\\])*)=(.*)", line, re.S).groups()  # type: ignore[union-attr]
        unescape = lambda s: re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r", "t": "\t", "f": "\f"}.get(  # noqa: E731
            m.group(1), m.group(1)), s)
        out[unescape(key)] = unescape(value)
    return out


@settings(deadline=None)  # pure and fast; a loaded CI machine must not fail it on time
@given(st.dictionaries(st.text(min_size=1), st.text()))
def test_properties_text_reads_back_as_written(props):
    text = properties_text(props)
    assert text.count("\n") == len(props) and "\r" not in text  # no value can end its line or start another entry
    assert _read_properties(text) == props
