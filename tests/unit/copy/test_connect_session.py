"""The Connect engine's kept session: the URL that names it and the file that keeps its id per package."""

from __future__ import annotations

import uuid

import pytest

from kafka_ferry.copy.connect_engine import kept_session_id, session_file, session_url

SID = "6f1c2b1e-9a4e-4c1e-8d55-3f2a9b7c1d01"


@pytest.mark.parametrize(("url", "expected"), [
    ("sc://h:15002", f"sc://h:15002/;session_id={SID}"),
    ("sc://h:15002/", f"sc://h:15002/;session_id={SID}"),  # the provider's hook, without login or token
    ("sc://h:15002/;token=t;use_ssl=True", f"sc://h:15002/;token=t;use_ssl=True;session_id={SID}"),
    ("sc://h:15002/;session_id=chosen", "sc://h:15002/;session_id=chosen"),  # the operator named one: theirs
])
def test_the_url_names_the_kept_session_after_any_parameters_of_the_connection(url, expected):
    assert session_url(url, SID) == expected


def test_the_session_id_is_kept_beside_the_package_and_reused_until_renewed(tmp_path):
    record = session_file(tmp_path / "kafka_ferry-0123456789abcdef.zip")
    assert record.name == "kafka_ferry-0123456789abcdef.zip.connect-session"

    first = kept_session_id(record)
    assert uuid.UUID(first).version == 4 and record.read_text() == first
    assert kept_session_id(record) == first  # the next batch attaches to the same session

    renewed = kept_session_id(record, renew=True)  # the server closed it
    assert renewed != first and kept_session_id(record) == renewed
    assert not list(tmp_path.glob("*.tmp"))


def test_a_torn_session_file_gets_a_new_id_instead_of_an_invalid_url(tmp_path):
    record = tmp_path / "p.zip.connect-session"
    record.write_text("6f1c2b1e-9a4e")  # cut short by a crash mid-write
    fresh = kept_session_id(record)
    assert fresh != "6f1c2b1e-9a4e" and uuid.UUID(fresh) and record.read_text() == fresh


def test_another_package_version_gets_its_own_session(tmp_path):
    old = kept_session_id(session_file(tmp_path / "kafka_ferry-aaaaaaaaaaaaaaaa.zip"))
    new = kept_session_id(session_file(tmp_path / "kafka_ferry-bbbbbbbbbbbbbbbb.zip"))
    assert old != new  # new code never runs in workers that imported the old


def test_a_kept_producer_is_started_ahead_and_dropped_after_a_failed_write():
    from kafka_ferry.kafka.cluster import DURABLE_PRODUCER, KafkaCluster

    with pytest.raises(ValueError, match="reuse_producers"):
        KafkaCluster("destination", {"bootstrap.servers": "127.0.0.1:1"}).start_durable_producer()

    cluster = KafkaCluster("destination", {"bootstrap.servers": "127.0.0.1:1"}, reuse_producers=True)
    cluster.start_durable_producer()
    started = cluster.producer(**DURABLE_PRODUCER)
    assert cluster.producer(**DURABLE_PRODUCER) is started  # the write that follows uses the started one
    cluster._drop_producer(started)
    assert cluster.producer(**DURABLE_PRODUCER) is not started  # a failed write's producer is never reused
