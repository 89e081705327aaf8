"""A PLAINTEXT connection pointed at a TLS listener is named as such at once (`kafka.bootstrap.listener_speaks`),
on the test bed's real SASL_SSL listener, instead of the client's "timed out" after its retries."""

from __future__ import annotations

import time

import pytest

import kafka_testbed as tb
from kafka_ferry.kafka.bootstrap import TLS, listener_speaks, parse_addresses
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.errors import ListenerProtocolError

pytestmark = [pytest.mark.integration]


def test_a_plaintext_listener_is_plain_and_a_sasl_ssl_listener_is_named_tls(testbed):
    assert listener_speaks(parse_addresses(tb.SOURCE.bootstrap)[0]) is None  # Kafka 3.9
    assert listener_speaks(parse_addresses(tb.DESTINATION.bootstrap)[0]) is None  # Kafka 4.3: old versions removed
    assert listener_speaks(parse_addresses(tb.SOURCE.sasl_bootstrap)[0]) == TLS
    assert listener_speaks(parse_addresses(tb.DESTINATION.sasl_bootstrap)[0]) == TLS


def test_a_plaintext_connection_on_the_sasl_ssl_port_fails_once_naming_the_setting(testbed):
    cluster = KafkaCluster("kf_wrong_port", {"bootstrap.servers": tb.SOURCE.sasl_bootstrap,
                                             "sasl.password": "hunter2"})
    started = time.monotonic()
    with pytest.raises(ListenerProtocolError) as raised:
        cluster.check_reachable()
    said = str(raised.value)
    assert raised.value.permanent and raised.value.speaks == TLS
    assert said.startswith(f"Kafka connection 'kf_wrong_port' (bootstrap servers {tb.SOURCE.sasl_bootstrap}): the "
                           "connection uses PLAINTEXT, but the listener")
    assert "set security.protocol to SSL (or SASL_SSL" in said and "hunter2" not in said
    print(f"named in {time.monotonic() - started:.2f} s")  # seconds, not the client's 30 s timeouts


def test_a_connection_that_says_sasl_ssl_is_not_probed_and_a_plain_one_passes(testbed):
    KafkaCluster("kf_plain", {"bootstrap.servers": tb.SOURCE.bootstrap}).check_reachable()
    KafkaCluster("kf_tls", {"bootstrap.servers": tb.SOURCE.sasl_bootstrap,
                            "security.protocol": "SASL_SSL"}).check_reachable()
