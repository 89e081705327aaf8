"""KIP-1071 streams groups (``group.protocol=streams``, Kafka 4.2+) on the test bed's 4.3 cluster, as the source of a
migration (issue 40).

What this pins, with the test bed's real Streams application running under the streams protocol: librdkafka
(confluent-kafka) does not list the group and describes it as Dead with no member while the application runs, but
reads its committed offsets. Without Kafka's Java Admin (kafka.streams_groups, opt-in), ``describe_groups`` reports
it UNDESCRIBED and every check counts it live (the promotion's inactive-groups check names it; a commit would be
refused); a migration that selects the application (named in the spec, or only its topics by a regex) is refused
in the pre-flight, before any change, naming the group. With it configured, the same group is listed, described
with its one live member (over PLAINTEXT and over SASL_SSL/SCRAM with the test bed's CA: the connection's settings
carried), its topology names input and internal topics, the pre-flight passes, and once the application stops the
group is EMPTY. One application run, several assertions against it.
"""

from __future__ import annotations

import json
import os
import time

import pytest
import yaml
from airflow.sdk.exceptions import AirflowFailException
from scenarios import write_spec

import streams_app
from kafka_ferry.core.common.cluster_model import UNDESCRIBED_STATE
from kafka_ferry.hooks.kafka_cluster import kafka_cluster
from kafka_ferry.kafka import streams_groups
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.operators.provision import MigrationPreflightOperator
from kafka_ferry.promotion.readiness import active_groups

# long: a Streams application (a JVM) and two pre-flights
pytestmark = [pytest.mark.integration, pytest.mark.long]

FOUR_X_CONN = "kf_test_streams_source"  # the 4.3 cluster of the test bed as a migration's source


def test_a_running_streams_group_is_counted_live_and_a_migration_selecting_it_is_refused(clusters, tmp_path,
                                                                                          monkeypatch):
    os.environ[f"AIRFLOW_CONN_{FOUR_X_CONN.upper()}"] = json.dumps(
        {"conn_type": "kafka", "extra": {"bootstrap.servers": clusters.destination_bootstrap}})
    p = clusters.unique("sgrp")
    text, counts, app_id = f"{p}.text", f"{p}.counts", f"{p}-wc"
    for topic in (text, counts):
        clusters.create_topic("destination", topic, 2)
    producer = clusters.producer("destination")
    for n in range(40):
        producer.produce(text, value=f"alpha beta {n}".encode())
    assert producer.flush(30) == 0
    four = kafka_cluster(FOUR_X_CONN)
    specs = {}
    for label, extra in (("named", {"applications": [{"application_id": app_id, "output_topics": [counts]}]}),
                         ("regex", {"topics": {"include": [f"{p}.*"]}})):
        (tmp_path / label).mkdir()
        path = write_spec(tmp_path / label, clusters, p, **extra)
        with open(path) as spec_file:
            doc = yaml.safe_load(spec_file)
        doc["source"]["connection_id"], doc["destination"]["connection_id"] = FOUR_X_CONN, clusters.SOURCE_CONN
        doc["name"] = f"{p.lower()}-{label}"
        with open(path, "w") as out:
            yaml.safe_dump(doc, out)
        specs[label] = path

    run = streams_app.start(tmp_path / "app", bootstrap=clusters.destination_bootstrap, application_id=app_id,
                            input_topic=text, output_topic=counts, state_dir=tmp_path / "state",
                            group_protocol="streams", purge_interval_ms=500)
    try:
        committed = {}
        for _ in range(120):  # the application commits its input offsets once it has processed them
            committed = four.groups_offsets([app_id])[app_id]
            if sum(o for (t, _), o in committed.items() if t == text) >= 40:
                break
            time.sleep(1)
        assert sum(o for (t, _), o in committed.items() if t == text) == 40, run.output()[-2000:]
        assert run.running()
        # what the client library sees: not listed, "Dead" with no member, its offsets read right
        assert app_id not in four.list_group_ids()
        described = four.admin.describe_consumer_groups([app_id], request_timeout=30)[app_id].result()
        assert (described.state.name, len(described.members)) == ("DEAD", 0)
        # what kafka-ferry makes of it: undescribed, counted live by every check
        info = four.describe_groups([app_id])[app_id]
        assert info.state == UNDESCRIBED_STATE and info.is_active and not info.described
        assert active_groups(four, [app_id]) == {app_id: info.describe()}
        # a migration that selects the application is refused before any change, naming the group
        before = sorted(t for t in clusters.cluster("source").list_topic_names() if p.lower() in t.lower())
        for label, path in specs.items():
            with pytest.raises(AirflowFailException) as refused:
                MigrationPreflightOperator(task_id="preflight", spec_path=path).execute({})
            assert (f"group(s) {app_id} have committed offsets on the source, but the client library neither lists "
                    "nor describes them: KIP-1071 streams groups") in str(refused.value), (label, str(refused.value))
        after = sorted(t for t in clusters.cluster("source").list_topic_names() if p.lower() in t.lower())
        assert before == after == []  # nothing was made on the migration's destination

        # with Kafka's Java Admin configured (kafka.streams_groups): listed, described with its live member
        monkeypatch.setenv(streams_groups.CLASSPATH_ENV, str(streams_app.jar_dir()))
        monkeypatch.setenv("KFERRY_LOCAL_DIR", str(tmp_path / "local"))
        assert app_id in four.list_group_ids()
        info = four.describe_groups([app_id])[app_id]
        assert info.described and info.member_count == 1 and info.is_active, info
        assert active_groups(four, [app_id]) == {app_id: info.describe()}
        topology = four.streams_group_topology([app_id])[app_id]
        assert topology.source_topics == (text,)
        assert topology.internal_topics == (f"{app_id}-{streams_app.STORE_NAME}-changelog",
                                            f"{app_id}-{streams_app.REPARTITION_NAME}-repartition")
        # the same through the SASL_SSL listener (SCRAM, the test bed's CA): the connection's settings, carried
        tb = clusters.tb
        secure = KafkaCluster("secure", tb.sasl_client_config(tb.DESTINATION, tb.ADMIN_USER,
                                                              tb.admin_password(tb.DESTINATION)))
        assert secure.describe_groups([app_id])[app_id] == info
        # a cluster before KIP-1071 (the 3.9 source): nothing more listed, nothing breaks
        assert not [g for g in clusters.cluster("source").list_group_ids() if g == app_id]
        # the pre-flight now sees the group and its unit (input from its committed offsets): no refusal
        try:
            MigrationPreflightOperator(task_id="preflight", spec_path=specs["named"]).execute({})
            outcome = "passed"
        except AirflowFailException as exc:
            outcome = str(exc)
        assert outcome == "passed", outcome
    finally:
        run.stop()
    # stopped: EMPTY, no member, not live: a promotion may go on
    info = four.describe_groups([app_id])[app_id]
    assert (info.state, info.member_count, info.is_active) == ("EMPTY", 0, False)
