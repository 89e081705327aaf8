"""librdkafka's log through Python logging with repeats dropped, and the pre-flight's bootstrap probe."""

from __future__ import annotations

import logging
import socket

import pytest

from kafka_ferry.kafka.bootstrap import parse_addresses, unreachable
from kafka_ferry.kafka.client_log import RepeatFilter
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.errors import ClusterUnreachableError


def record(message: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("kafka_ferry.librdkafka", level, __file__, 1, message, (), None)


FAIL = ("FAIL [rdkafka#producer-{n}] [thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to "
        "ipv4#127.0.0.1:1 failed: Connection refused (after {ms}ms in state CONNECT)")


def test_repeats_of_a_line_pass_once_per_window_then_say_how_many_were_dropped():
    now = [0.0]
    keep = RepeatFilter(window_s=60, clock=lambda: now[0])
    passed = []
    for i in range(2000):  # every reconnect, from several clients, with its own timings
        now[0] = i * 0.01
        r = record(FAIL.format(n=i % 5, ms=i % 7))
        if keep.filter(r):
            passed.append(r.getMessage())
    assert len(passed) == 1
    now[0] = 61.0
    r = record(FAIL.format(n=9, ms=0))
    assert keep.filter(r) and r.getMessage().endswith("(and 1999 more like it in the last 60 s)")


def test_distinct_lines_and_levels_each_pass():
    keep = RepeatFilter(window_s=60, clock=lambda: 0.0)
    assert keep.filter(record("Connect to 127.0.0.1:1 failed"))
    assert keep.filter(record("Connect to 127.0.0.1:2 failed"))
    assert keep.filter(record("Connect to 127.0.0.1:1 failed", logging.WARNING))
    assert not keep.filter(record("Connect to 127.0.0.1:1 failed"))


@pytest.mark.parametrize(("servers", "addresses"), [
    ("a:1,b:2", [("a", 1), ("b", 2)]),
    (" SASL_SSL://user@broker.example:9093 , host", [("broker.example", 9093), ("host", 9092)]),
    ("[::1]:9094", [("::1", 9094)]),
    ("", []),
])
def test_bootstrap_servers_parse_to_host_and_port(servers, addresses):
    assert parse_addresses(servers) == addresses


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_probe_passes_when_one_address_accepts_and_names_each_reason_when_none_does():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        live = f"127.0.0.1:{server.getsockname()[1]}"
        dead = f"127.0.0.1:{free_port()}"
        assert unreachable(f"{dead},{live}") is None
    assert unreachable(dead) == {dead: "Connection refused"}
    assert unreachable("") is None


def test_an_unreachable_cluster_is_deterministic_and_names_only_the_connection_and_addresses():
    dead = f"127.0.0.1:{free_port()}"
    cluster = KafkaCluster("kf_dead", {"bootstrap.servers": dead, "sasl.password": "hunter2"})
    with pytest.raises(ClusterUnreachableError) as raised:
        cluster.check_reachable()
    assert raised.value.permanent
    assert str(raised.value).startswith(f"Kafka connection 'kf_dead' (bootstrap servers {dead}): no bootstrap "
                                        f"address accepts a connection ({dead}: Connection refused)")
    assert "hunter2" not in str(raised.value)


def test_a_real_client_on_a_dead_port_logs_through_python_logging_a_few_lines(caplog):
    """librdkafka reconnects every few hundred ms and logs each failure; the logger keeps one of them."""
    cluster = KafkaCluster("kf_dead", {"bootstrap.servers": f"127.0.0.1:{free_port()}"}, request_timeout_s=3)
    with caplog.at_level(logging.DEBUG, logger="kafka_ferry.librdkafka"):
        with pytest.raises(Exception):  # noqa: B017,PT011 - the timeout's wording is the hook test's subject
            cluster.describe_cluster()
        cluster.admin.poll(0)
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka_ferry.librdkafka"]
    assert lines and any("Connection refused" in line for line in lines)
    assert len(lines) <= 3, lines


def test_what_a_plaintext_client_saw_names_the_listener():
    from kafka_ferry.kafka.bootstrap import SASL, TLS, classify_listener

    tls_alert = bytes.fromhex("15030300020250")
    assert classify_listener(tls_alert, None) == TLS
    assert classify_listener(bytes.fromhex("160303007a02"), None) == TLS  # a server hello
    api_versions = bytes.fromhex("0000017800000001000000")
    assert classify_listener(api_versions, True) is None  # plain Kafka: it answered Metadata too
    assert classify_listener(api_versions, False) == SASL  # answered ApiVersions, closed on Metadata
    assert classify_listener(None, None) is None and classify_listener(b"", None) is None  # closed: cannot tell


def test_a_warning_of_a_step_librdkafka_retries_itself_is_info_and_other_warnings_stay(caplog):
    from kafka_ferry.kafka.client_log import librdkafka_logger

    logger = librdkafka_logger()
    getpid = ("GETPID", "rdkafka#producer-3", "[thrd:main]: Failed to acquire idempotence PID from broker "
              "127.0.0.1:29092/1: Broker: Coordinator load in progress: retrying")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        logger.warning("%s [%s] %s", *getpid)
        logger.warning("%s [%s] %s", "FAIL", "rdkafka#producer-3", "[thrd:main]: Connect failed: Connection refused")
    assert [(r.levelname, r.getMessage().split(" ")[0]) for r in caplog.records] == [("WARNING", "FAIL")]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=logger.name):
        logger.warning("%s [%s] %s", *getpid[:2], getpid[2].replace("PID", "PID again"))
    assert [(r.levelname, r.getMessage().split(" ")[0]) for r in caplog.records] == [("INFO", "GETPID")]
