"""Pre-flight on the real test bed: a selection that matches nothing is refused, once, naming the closest names."""

from __future__ import annotations

import re

import pytest
from airflow.sdk.exceptions import AirflowFailException
from scenarios import commit_source_group, write_spec

from kafka_ferry.core.specs.selection_check import EmptySelection
from kafka_ferry.operators.provision import MigrationPreflightOperator

pytestmark = pytest.mark.integration


def preflight(spec_path: str) -> dict:
    return MigrationPreflightOperator(task_id="preflight", spec_path=spec_path).execute({})


def test_a_typo_in_topics_include_fails_preflight_naming_the_closest_topic(clusters, tmp_path):
    p = clusters.unique("sel")
    clusters.create_topic("source", f"{p}.events", 1)
    spec_path = write_spec(tmp_path, clusters, p, topics={"include": [f"{p}.event"]})

    with pytest.raises(AirflowFailException) as raised:
        preflight(spec_path)

    assert isinstance(raised.value.__cause__, EmptySelection)  # deterministic: fails the task without retry
    # the shared test bed's topic count moves as other tests run: the count is any, the closest is ours
    assert re.fullmatch(
        rf"migration '{p}': nothing selected, nothing was changed: topics\.include \['{re.escape(p)}\.event'\] "
        rf"matched 0 of \d+ source topics; closest: {re.escape(p)}\.events(, [^;]+)?; set topics\.allow_empty: true "
        "if an empty selection is intended", str(raised.value)), str(raised.value)
    assert clusters.cluster("destination").describe_topics([f"{p}.events", f"kafka-ferry.{p}.state"]) == {}


def test_a_typo_in_groups_include_fails_preflight_unless_allowed(clusters, tmp_path):
    p = clusters.unique("selg")
    topic = clusters.create_topic("source", f"{p}.t", 1)
    commit_source_group(clusters, f"{p}-consumers", {(topic, 0): 0})
    typo = {"include": [f"{p}-consumer"]}

    with pytest.raises(AirflowFailException) as raised:
        preflight(write_spec(tmp_path, clusters, p, groups=typo))
    assert re.search(rf"groups\.include \['{re.escape(p)}-consumer'\] matched 0 of \d+ source groups; closest: "
                     rf"{re.escape(p)}-consumers", str(raised.value)), str(raised.value)
    assert "topics.include" not in str(raised.value)

    diff = preflight(write_spec(tmp_path, clusters, p, groups={**typo, "allow_empty": True}))
    assert diff["groups"]["migrated"] == {}
