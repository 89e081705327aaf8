"""Pre-flight refuses, before anything changes, a spec using what its tenant is not granted in the platform's
tenants file (issue 24); without the file, pre-flight runs as before. Real source cluster: an identity rename's
destination names are the selected source topics, known only from there. With the file, the state topic records
the spec file that owns it, and a run from another spec file with the same name is refused before any change
(issue 36)."""

from __future__ import annotations

import pytest
import yaml
from airflow.sdk.exceptions import AirflowFailException
from scenarios import write_spec

from kafka_ferry.core.common.state_records import OWNER_KIND
from kafka_ferry.core.specs.spec import SpecError
from kafka_ferry.operators.provision import MigrationPreflightOperator, ProvisionMirrorTopicsOperator
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration


def test_preflight_refuses_what_the_tenant_is_not_granted_and_changes_nothing(clusters, tmp_path, monkeypatch):
    p = clusters.unique("tenant")
    clusters.create_topic("source", f"{p}.orders", 1)
    spec_path = write_spec(tmp_path, clusters, p)
    monkeypatch.delenv("KFERRY_TENANTS_FILE", raising=False)
    assert MigrationPreflightOperator(task_id="pf", spec_path=spec_path).execute({})["migration"] == p.lower()

    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"tenants": {"test": {
        "spec_paths": ["*.yaml"], "name_prefixes": [p.lower()],
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


def test_the_state_topic_belongs_to_the_first_spec_file_and_another_is_refused_before_any_change(
        clusters, tmp_path, monkeypatch):
    """Reproduction (issue 36): a second spec reusing a migration's `name` got the same DAG id, work dir, state
    topic, lease and reader groups."""
    p = clusters.unique("owner")
    clusters.create_topic("source", f"{p}.orders", 1)
    clusters.create_topic("source", f"{p}.payments", 1)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    owner = write_spec(tmp_path / "a", clusters, p, topics={"include": [f"{p}\\.orders"]})
    # the same name and tenant, another spec file: it selects the payments topic only
    intruder = write_spec(tmp_path / "b", clusters, p, topics={"include": [f"{p}\\.payments"]})
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"tenants": {"test": {
        "spec_paths": ["a/*.yaml", "b/*.yaml"], "name_prefixes": [p.lower()],
        "connections": [clusters.SOURCE_CONN, clusters.DESTINATION_CONN, clusters.SPARK_CONN],
        "state_topics": [f"kafka-ferry.{p.lower()}.state"], "destination_topic_prefixes": [""]}}}))
    monkeypatch.setenv("KFERRY_TENANTS_FILE", str(tenants))

    MigrationPreflightOperator(task_id="pf", spec_path=owner).execute({})
    ProvisionMirrorTopicsOperator(task_id="pt", spec_path=owner).execute({})  # the first writer records the owner
    store = MigrationStateStore(clusters.cluster("destination"), f"kafka-ferry.{p.lower()}.state")
    recorded = store.read_kind(OWNER_KIND)["spec"]
    assert {k: recorded[k] for k in ("spec_path", "tenant", "name")} == {
        "spec_path": f"a/{p}.yaml", "tenant": "test", "name": p.lower()}

    for operator in (MigrationPreflightOperator, ProvisionMirrorTopicsOperator):
        with pytest.raises(AirflowFailException) as raised:
            operator(task_id="x", spec_path=intruder).execute({})
        assert (f"state topic 'kafka-ferry.{p.lower()}.state' belongs to spec file 'a/{p}.yaml' of tenant 'test' "
                f"(recorded by its first run); this run is from 'b/{p}.yaml' of tenant 'test': refused before any "
                "change") in str(raised.value)
    assert clusters.cluster("destination").describe_topics([f"{p}.payments"]) == {}  # nothing provisioned for it
    MigrationPreflightOperator(task_id="pf", spec_path=owner).execute({})  # the owner still runs
