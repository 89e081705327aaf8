"""Records deleted by source retention before they were copied: a loud failure, or an explicit, recorded gap."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka import TopicPartition
from scenarios import (
    plan_and_copy_in_process,
    provision,
    read_partition,
    seed_plain,
    write_spec,
)

from kafka_ferry.core.batches.batch_planning import RetentionGapError
from kafka_ferry.core.common.state_records import GAP_KIND
from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.operators.copy import PlanCopyBatchOperator
from kafka_ferry.state.store import MigrationStateStore

pytestmark = pytest.mark.integration


def delete_records(clusters, topic: str, before: dict[int, int]) -> None:
    request = [TopicPartition(topic, p, o) for p, o in before.items()]
    for future in clusters.admin("source").delete_records(request).values():
        future.result(30)


def test_a_retention_gap_fails_naming_every_lost_range_unless_the_spec_accepts_it(
        clusters, tmp_path, work_dir, configs_env):
    p = clusters.unique("gap")
    topic = clusters.create_topic("source", f"{p}.t", 3)
    seed_plain(clusters, topic, 3, 50)
    spec_path = write_spec(tmp_path, clusters, p)
    provision(spec_path)
    assert plan_and_copy_in_process(spec_path, configs_env)["records_copied"] == 150
    seed_plain(clusters, topic, 3, 50, start=50)
    delete_records(clusters, topic, {0: 80, 1: 100})  # partition 2 keeps everything

    with pytest.raises(AirflowFailException) as failure:
        PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})

    message = str(failure.value)
    assert isinstance(failure.value.__cause__, RetentionGapError)
    assert f"{topic}-0 [50, 80) 30 offsets" in message and f"{topic}-1 [50, 100) 50 offsets" in message
    assert f"{topic}-2" not in message
    assert "accept_retention_gaps" in message
    store = MigrationStateStore(clusters.cluster("destination"), f"kafka-ferry.{p}.state")
    assert store.read_kind(GAP_KIND) == {}
    assert len(read_partition(clusters, "destination", topic, 0)) == 50  # nothing copied past the gap

    accepting = write_spec(tmp_path, clusters, p, copy={"accept_retention_gaps": True})
    report = plan_and_copy_in_process(accepting, configs_env)

    assert [(g["partition"], g["lost_start"], g["lost_end"], g["lost_count"]) for g in report["gaps"]] == [
        (0, 50, 80, 30), (1, 50, 100, 50)]
    ledger = store.read_kind(GAP_KIND)
    assert {(v["partition"], v["lost_start"], v["lost_end"]) for v in ledger.values()} == {(0, 50, 80), (1, 50, 100)}
    assert report["records_copied"] == 20 + 50
    assert report["lag_after_total"] == 0
    # Every record the source still holds is on the destination once, in order; the lost ones are absent.
    for partition, upstream in ((0, [*range(50), *range(80, 100)]), (1, list(range(50))), (2, list(range(100)))):
        copied = [read_provenance(r.headers)[1] for r in read_partition(clusters, "destination", topic, partition)]
        assert copied == upstream
    # The gap is recorded once: the next batch plans nothing and reports no new gap.
    again = plan_and_copy_in_process(accepting, configs_env)
    assert again["gaps"] == [] and again["partitions_planned"] == 0
