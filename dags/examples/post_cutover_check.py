"""Airflow DAG example: a downstream team's post-cutover check, scheduled on a migrated topic's Asset.

Every mirror topic a kafka-ferry migration writes is an Asset ``kafka://<host:port>/<topic>`` (the destination
connection's first bootstrap address). A catch-up batch adds an event to it per batch that wrote records (extra
``kind: copied``); a promotion adds one marking the topic promoted (extra ``kind: promoted``, the migration, the
cutover offsets). This DAG runs on any of them and goes on only for a promotion: the moment a downstream team
checks its consumers on the new cluster.

Which topic: ``KFERRY_EXAMPLE_BOOTSTRAP`` (default the test bed's destination, ``localhost:29092``) and
``KFERRY_EXAMPLE_TOPIC`` (default ``demo.orders``, the demo tenant's orders). Both are data, validated as a
bootstrap address and a Kafka topic name; a bad value fails this file's import only.
"""

from __future__ import annotations

import os
from datetime import timedelta

from airflow.sdk import dag, task

from kafka_ferry.airflow_native.assets import topic_asset
from kafka_ferry.core.observability.kafka_assets import is_promotion_event

MIGRATED_TOPIC = topic_asset(os.environ.get("KFERRY_EXAMPLE_BOOTSTRAP", "localhost:29092"),
                             os.environ.get("KFERRY_EXAMPLE_TOPIC", "demo.orders"))


@dag(dag_id="kafka_ferry_example_post_cutover_check", schedule=[MIGRATED_TOPIC], catchup=False,
     max_active_runs=1, tags=["kafka-ferry", "example"],
     default_args={"retries": 0, "execution_timeout": timedelta(minutes=5)},
     doc_md=f"Runs on every event of `{MIGRATED_TOPIC.uri}`; checks on after its promotion only.")
def post_cutover_check():
    @task.short_circuit
    def was_promoted(triggering_asset_events=None) -> bool:
        """Catch-up copies wake this DAG too: only a promotion's event lets the check run."""
        events = [e for _, evs in (triggering_asset_events or {}).items() for e in evs]
        return any(is_promotion_event(e.extra) for e in events)

    @task
    def check_cutover(triggering_asset_events=None) -> dict:
        """Where the team's consumers continue on the new cluster (the promotion's cutover offsets)."""
        promoted = [e.extra for _, evs in (triggering_asset_events or {}).items() for e in evs
                    if is_promotion_event(e.extra)]
        last = promoted[-1]
        print(f"{MIGRATED_TOPIC.uri} promoted by migration {last['migration']} (source topic "
              f"{last['source_topic']}); cutover offsets per partition [source next, destination next]: "
              f"{last['offsets']}")
        return {"uri": MIGRATED_TOPIC.uri, "migration": last["migration"], "offsets": last["offsets"]}

    was_promoted() >> check_cutover()


post_cutover_check()
