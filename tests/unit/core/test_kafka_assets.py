"""Topic Asset URIs, lineage namespaces and asset-event extras: the names Airflow stores and schedules on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.observability.kafka_assets import (
    MAX_PARTITIONS_IN_EXTRA,
    AssetNameError,
    copied_alias,
    copy_event_extras,
    first_address,
    is_promotion_event,
    lineage_namespace,
    promoted_alias,
    promotion_event_extra,
    topic_asset_uri,
)


@pytest.mark.parametrize(("servers", "address"), [
    ("localhost:29092", "localhost:29092"),
    ("b1.example.com:9093,b2.example.com:9093", "b1.example.com:9093"),
    (" SASL_SSL://Broker-1.Example.com:9094 , other:1", "Broker-1.Example.com:9094"),  # no case folding
    ("10.0.0.7", "10.0.0.7:9092"),
    ("[::1]:29092", "[::1]:29092"),
    ("[fe80::1]", "[fe80::1]:9092"),
    (",,kafka:9092", "kafka:9092"),
])
def test_the_first_bootstrap_address_names_the_cluster(servers, address):
    assert first_address(servers) == address
    assert lineage_namespace(servers) == f"kafka://{address}"


@pytest.mark.parametrize("servers", ["", None, " , ", "host:0", "host:70000", "host:x", "ho st:9092",
                                     "host/evil:9092", "[::1]x", "a@b:9092", "[zz::1]:1"])
def test_an_address_that_cannot_name_a_cluster_is_refused(servers):
    with pytest.raises(AssetNameError):
        first_address(servers)


def test_a_topic_uri_is_the_kafka_providers_form():
    assert topic_asset_uri("localhost:29092,localhost:29093", "demo.orders") == "kafka://localhost:29092/demo.orders"


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "a b", "ü", "x" * 250, "a?b", "a#b"])
def test_a_name_that_is_no_kafka_topic_is_refused(topic):
    with pytest.raises(AssetNameError, match="not a Kafka topic name"):
        topic_asset_uri("localhost:9092", topic)


@given(st.from_regex(r"[A-Za-z0-9._-]{1,249}", fullmatch=True).filter(lambda t: t not in (".", "..")))
def test_every_legal_topic_name_makes_a_uri_ending_in_it(topic):
    assert topic_asset_uri("h:1", topic) == f"kafka://h:1/{topic}"


def test_aliases_are_per_migration_and_refuse_a_name_no_spec_allows():
    assert copied_alias("demo-tenant") == "kafka-ferry/demo-tenant/copied"
    assert promoted_alias("demo-tenant") == "kafka-ferry/demo-tenant/promoted"
    for bad in ("", "Demo", "a/b", "x" * 81):
        with pytest.raises(AssetNameError):
            copied_alias(bad)


def _row(source, partition, destination, start, end, records, size=10):
    return {"source_topic": source, "partition": partition, "destination_topic": destination, "start_offset": start,
            "next_upstream_offset": end, "records_copied": records, "bytes_copied": size * records}


def test_one_event_per_destination_topic_that_got_records():
    rows = [_row("orders", 0, "m.orders", 0, 40, 40), _row("orders", 1, "m.orders", 5, 25, 20),
            _row("payments", 0, "m.payments", 7, 7, 0)]
    extras = copy_event_extras("mig", "b-1", rows)
    assert list(extras) == ["m.orders"]  # payments copied nothing: no event wakes a downstream DAG for it
    assert extras["m.orders"] == {"migration": "mig", "batch_id": "b-1", "kind": "copied", "source_topic": "orders",
                                  "records": 60, "bytes": 600, "offsets": {"0": [0, 40], "1": [5, 25]}}
    assert not is_promotion_event(extras["m.orders"])


def test_an_event_extra_keeps_a_bounded_number_of_partitions():
    rows = [_row("t", p, "t", 0, 1, 1) for p in range(MAX_PARTITIONS_IN_EXTRA + 50)]
    extra = copy_event_extras("mig", "b", rows)["t"]
    assert extra["records"] == MAX_PARTITIONS_IN_EXTRA + 50  # the totals count every partition
    assert len(extra["offsets"]) == MAX_PARTITIONS_IN_EXTRA and extra["offsets_truncated"]
    assert extra["partitions"] == MAX_PARTITIONS_IN_EXTRA + 50 and "0" in extra["offsets"]


def test_a_destination_topic_name_from_a_report_is_checked_too():
    with pytest.raises(AssetNameError):
        copy_event_extras("mig", "b", [_row("t", 0, "../etc", 0, 1, 1)])


def test_a_promotion_event_marks_the_topic_promoted_with_its_cutover_offsets():
    extra = promotion_event_extra("mig", "orders", {1: (25, 20), 0: (40, None)}, "manual__1", 1700)
    assert extra == {"migration": "mig", "kind": "promoted", "promoted": True, "source_topic": "orders",
                     "run_id": "manual__1", "offsets": {"0": [40, None], "1": [25, 20]}, "promoted_at_ms": 1700}
    assert is_promotion_event(extra)
    assert not is_promotion_event({"kind": "promoted"}) and not is_promotion_event(None)
