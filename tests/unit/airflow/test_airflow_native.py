"""Topics as Assets through Airflow's own objects: the Kafka provider's URI handler, alias outlets on the generated
DAG, the events an alias collects, and the OpenLineage datasets the operators return."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.sdk import Asset, AssetAlias
from airflow.sdk.execution_time.context import OutletEventAccessors

from kafka_ferry.airflow_native.announce import TopicLineage, announce_batch
from kafka_ferry.airflow_native.assets import add_promotion_events, topic_asset
from kafka_ferry.airflow_native.lineage import topic_lineage
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.dag_factory import build_migration_dag

SPEC = Path(__file__).resolve().parents[3] / "dags" / "migrations" / "demo-tenant.yaml"


def test_a_topic_asset_passes_the_kafka_providers_uri_handler():
    asset = topic_asset("localhost:29092,localhost:29093", "demo.orders")
    assert (asset.name, asset.uri) == ("kafka://localhost:29092/demo.orders", "kafka://localhost:29092/demo.orders")
    assert asset == Asset(uri="kafka://localhost:29092/demo.orders")  # what a downstream DAG schedules on
    with pytest.raises(ValueError, match="must contain a topic name"):  # the provider's own handler runs
        Asset(uri="kafka://localhost:29092/")


def test_the_generated_dag_declares_one_alias_per_migration_on_its_copy_and_promotion_tasks():
    dag = build_migration_dag(load_spec(SPEC), SPEC)
    assert dag.get_task("copy_batch").outlets == [AssetAlias("kafka-ferry/demo-tenant/copied")]
    promoted = [AssetAlias("kafka-ferry/demo-tenant/promoted")]
    assert dag.get_task("promote_reconcile_mark").outlets == promoted
    assert dag.get_task("promote_topics").outlets == promoted
    assert dag.get_task("promote_final_copy").outlets == [] and dag.get_task("plan_copy").outlets == []


def _report():
    return {"migration": "demo-tenant", "batch_id": "b-7", "partitions": [
        {"source_topic": "demo.orders", "partition": 0, "destination_topic": "demo.orders", "start_offset": 10,
         "next_upstream_offset": 30, "records_copied": 20, "bytes_copied": 200},
        {"source_topic": "demo.payments", "partition": 0, "destination_topic": "demo.payments", "start_offset": 3,
         "next_upstream_offset": 3, "records_copied": 0, "bytes_copied": 0}]}


def test_a_batch_adds_an_event_per_written_topic_through_the_copy_alias_and_names_its_lineage():
    events, task = OutletEventAccessors(), TopicLineage()
    added = announce_batch({"outlet_events": events}, task, "src:19092", "dst:29092", _report())
    alias_events = events[AssetAlias("kafka-ferry/demo-tenant/copied")].asset_alias_events
    assert [(e.dest_asset_key.uri, e.extra["records"], e.extra["offsets"]) for e in alias_events] == [
        ("kafka://dst:29092/demo.orders", 20, {"0": [10, 30]})]
    assert list(added) == ["kafka://dst:29092/demo.orders"]
    lineage = task.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("kafka://src:19092", "demo.orders"),
                                                              ("kafka://src:19092", "demo.payments")]
    assert task.get_openlineage_facets_on_start().inputs == []


def test_a_promotion_adds_a_promoted_event_per_topic():
    events = OutletEventAccessors()
    add_promotion_events({"outlet_events": events}, "demo-tenant", "dst:29092",
                         {"demo.orders": ("demo.orders", {0: (30, 30)})}, "manual__x", 5)
    (event,) = events[AssetAlias("kafka-ferry/demo-tenant/promoted")].asset_alias_events
    assert event.dest_asset_key.uri == "kafka://dst:29092/demo.orders"
    assert event.extra["promoted"] is True and event.extra["offsets"] == {"0": [30, 30]}


def test_outside_a_task_run_nothing_is_added_and_nothing_fails():
    added = announce_batch({}, TopicLineage(), "s:1", "d:2", _report())  # no outlet_events: a CLI or unit call
    assert list(added) == ["kafka://d:2/demo.orders"] and added["kafka://d:2/demo.orders"]["records"] == 20


def test_each_mirror_names_its_source_topic_in_a_symlinks_facet():
    lineage = topic_lineage("old:9092", "new:9093", [("orders", "m.orders"), ("orders", "m.orders")])
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("kafka://old:9092", "orders")]
    (output,) = lineage.outputs
    assert (output.namespace, output.name) == ("kafka://new:9093", "m.orders")
    (identifier,) = output.facets["symlinks"].identifiers
    assert (identifier.namespace, identifier.name, identifier.type) == ("kafka://old:9092", "orders", "TOPIC")


def test_a_bad_example_topic_breaks_only_the_example_file(monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("KFERRY_EXAMPLE_TOPIC", "../etc/passwd")
    bag = DagBag(dag_folder=str(SPEC.parents[1]))
    assert [Path(f).name for f in bag.import_errors] == ["post_cutover_check.py"]
    assert "not a Kafka topic name" in next(iter(bag.import_errors.values()))
    assert "kafka_ferry__demo-tenant" in bag.dag_ids  # the migration DAG still parses


def test_the_example_is_scheduled_on_the_demo_topics_asset(monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.delenv("KFERRY_EXAMPLE_BOOTSTRAP", raising=False)
    monkeypatch.delenv("KFERRY_EXAMPLE_TOPIC", raising=False)
    dag = DagBag(dag_folder=str(SPEC.parents[1])).dags["kafka_ferry_example_post_cutover_check"]
    assert dag.schedule == [Asset(uri="kafka://localhost:29092/demo.orders")]
