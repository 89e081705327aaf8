"""Pre-flight refuses, before anything changes, a spec using what its tenant is not granted in the platform's
tenants file (issue 24); without the file, pre-flight runs as before. Real source cluster: an identity rename's
destination names are the selected source topics, known only from there."""

from __future__ import annotations

import pytest
import yaml
from airflow.sdk.exceptions import AirflowFailException
from scenarios import write_spec

from kafka_ferry.core.spec import SpecError
from kafka_ferry.operators.provision import MigrationPreflightOperator

pytestmark = pytest.mark.integration


def test_preflight_refuses_what_the_tenant_is_not_granted_and_changes_nothing(clusters, tmp_path, monkeypatch):
    p = clusters.unique("tenant")
    clusters.create_topic("source", f"{p}.orders", 1)
    spec_path = write_spec(tmp_path, clusters, p)
    monkeypatch.delenv("KFERRY_TENANTS_FILE", raising=False)
    assert MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})["migration"] == p.lower()

    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"tenants": {"test": {
        "connections": [clusters.SOURCE_CONN, clusters.SPARK_CONN],  # not the destination's
        "state_topics": [f"kafka-ferry.{p.lower()}.state"], "destination_topic_prefixes": ["granted."]}}}))
    monkeypatch.setenv("KFERRY_TENANTS_FILE", str(tenants))
    with pytest.raises(AirflowFailException) as raised:
        MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})
    message = str(raised.value)
    assert isinstance(raised.value.__cause__, SpecError)  # deterministic: no retry
    assert f"field 'destination.connection_id' = '{clusters.DESTINATION_CONN}': tenant 'test' may not use this " \
           f"connection (tenants file {tenants})" in message
    assert f"field 'topics.include' = '{p}.orders': destination topic(s) outside tenant 'test'" in message
    assert clusters.cluster("destination").describe_topics([f"{p}.orders"]) == {}
