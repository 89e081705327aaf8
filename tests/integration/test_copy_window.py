"""A batch window and a rate limit on the real test bed: a batch cut by its deadline mid-copy, then the next run
resumes exactly (every record once, groups translate exactly); a first window without a measured rate starves no
partition of a lane; the limit reaches the copier on spark-submit and on Spark Connect.

The cut is deterministic, not timed: a limit of 100 records/s lets at most ~100 records per second of window out
(one chunk ahead at most, ``core.batches.rate_limit``), so a 12 s window copies well under the 4800 records seeded, and
the first chunk goes out before any wait, so the copier started before the deadline copies some.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from scenarios import (
    assert_copied_exactly_once,
    assert_syncs_exact,
    commit_source_group,
    consume_as_group,
    provision,
    provision_groups,
    read_syncs,
    run_batch,
    seed_plain,
    write_spec,
)

from kafka_ferry.copy.batch_runner import in_process_engine
from kafka_ferry.copy.batch_runner import run_batch as run_copy_batch
from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.copy.runner import group_pace, task_groups
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.operators.copy import CopyReportOperator, PlanCopyBatchOperator
from kafka_ferry.promotion.commit import commit_translated_offsets
from kafka_ferry.state.batches import batch_history
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.translation.translate import translate_migration

pytestmark = pytest.mark.integration

PARTITIONS = 3
PER_PARTITION = 1600


class _TI:
    def __init__(self) -> None:
        self.xcom: dict = {}

    def xcom_pull(self, task_ids: str):
        return self.xcom.get(task_ids)


def _windowed_batch(spec_path: str, cluster_configs: dict) -> dict:
    """plan_copy (due now) -> the copy in this process -> copy_report, as the DAG runs them; the full report."""
    ti = _TI()
    context = {"ti": ti, "dag_run": SimpleNamespace(run_after=datetime.now(UTC))}
    summary = ti.xcom["plan_copy"] = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute(context)
    if not summary["empty"]:
        run_copy_batch(CopyPlan.read(summary["plan_path"]), cluster_configs, in_process_engine,
                       summary["report_path"])
    CopyReportOperator(task_id="copy_report", spec_path=spec_path).execute(context)
    return json.loads(Path(summary["report_path"]).read_text())


def test_a_batch_cut_by_its_deadline_resumes_exactly_in_the_next_run(clusters, tmp_path, work_dir, cluster_configs):
    p = clusters.unique("win")
    topic = clusters.create_topic("source", f"{p}.t", PARTITIONS)
    seed_plain(clusters, topic, PARTITIONS, PER_PARTITION)
    groups = {f"{p}-g{i}": {(topic, q): (i * 397 + q * 211) % PER_PARTITION for q in range(PARTITIONS)}
              for i in range(4)}
    groups[f"{p}-end"] = {(topic, q): PER_PARTITION for q in range(PARTITIONS)}
    for group, offsets in groups.items():
        commit_source_group(clusters, group, offsets)
    # a byte limit: before the first batch the sizing has no record size to turn it into records, so the
    # deadline alone bounds this batch (~27-byte records: ~100 records/s)
    spec_path = write_spec(tmp_path, clusters, p, copy={"max_bytes_per_second": 2700, "window": "12s",
                                                         "max_records_per_partition": 10_000})
    provision(spec_path)
    provision_groups(spec_path)
    spec = load_spec(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    source_id = source.describe_cluster().cluster_id

    cut = _windowed_batch(spec_path, cluster_configs)

    total = PARTITIONS * PER_PARTITION
    assert cut["stop_reason"] == "deadline", cut
    assert 0 < cut["records_copied"] < total
    assert cut["lag_after_total"] == total - cut["records_copied"]
    assert cut["overrun_s"] is not None and cut["deadline_ms"] is not None
    stopped = [row for row in cut["partitions"] if row["stop_reason"] == "deadline"]
    assert stopped and all(row["next_upstream_offset"] < row["planned_end"] for row in stopped)
    # nothing half done: each partition's progress is what it produced, its syncs written before it
    store = MigrationStateStore(destination, spec.state_topic_name)
    kept = [b for b in batch_history(store) if b["batch_id"] == cut["batch_id"]]
    assert kept and kept[0]["stop_reason"] == "deadline" and kept[0]["overrun_s"] == cut["overrun_s"]
    syncs = read_syncs(clusters, f"dst-{p}", topic)
    for row in cut["partitions"]:
        copied = row["next_upstream_offset"]
        on_destination = clusters.cluster("destination").list_offsets([(topic, row["partition"])], "latest")
        assert on_destination[(topic, row["partition"])] == copied  # plain topic: offset n is the n-th record
        if copied:
            assert max(up for up, _ in syncs[row["partition"]]) == copied - 1  # the last copied record's sync

    # the next run, same window: sized from the measured rate of the cut batch, at most that many offsets
    sized = _windowed_batch(spec_path, cluster_configs)
    assert sized["window_budget_records"] is not None
    assert sum(r["planned_end"] - r["planned_start"] for r in sized["partitions"]) <= sized["window_budget_records"]
    assert sized["stop_reason"] in ("limit", "deadline") and sized["records_copied"] > 0

    # the last run: no window, no limit; every record once, syncs and groups exact
    doc = yaml.safe_load(Path(spec_path).read_text())
    del doc["copy"]["window"], doc["copy"]["max_bytes_per_second"]
    Path(spec_path).write_text(yaml.safe_dump(doc))
    resumed = _windowed_batch(spec_path, cluster_configs)

    assert resumed["stop_reason"] == "caught_up" and resumed["lag_after_total"] == 0
    assert resumed["records_copied"] + sized["records_copied"] + cut["records_copied"] == total
    assert resumed["records_resumed"] == sized["records_resumed"] == 0
    pairs = assert_copied_exactly_once(clusters, topic, topic, PARTITIONS, source_id)
    syncs = read_syncs(clusters, f"dst-{p}", topic)
    for q in range(PARTITIONS):
        assert_syncs_exact(syncs[q], pairs[q], PER_PARTITION)
    result = translate_migration(load_spec(spec_path), source, destination, store)
    assert not result.flagged
    outcomes = commit_translated_offsets(destination, result.decisions, strict=True)
    assert all(not o.refused and not o.skipped for o in outcomes)
    for group, offsets in groups.items():
        received = consume_as_group(clusters, group, topic, PARTITIONS)
        for q in range(PARTITIONS):
            assert received[q] == list(range(offsets[(topic, q)], PER_PARTITION)), f"{group} {topic}-{q}"


def test_a_first_window_without_a_measured_rate_copies_some_of_every_partition_and_resumes_exactly(
        clusters, tmp_path, work_dir, cluster_configs):
    # One lane copies four partitions one after another; no batch has measured a rate and the byte limit alone
    # cannot size the window (no record size yet), so the deadline alone bounds this batch (~100 records/s over
    # 12 s, far less than the 6400 seeded). Each partition stops at its share of the lane's time
    # (core.batches.batch_window.share_deadline): every one copies some; none is left for the deadline to starve.
    p = clusters.unique("winf")
    partitions = 4
    topic = clusters.create_topic("source", f"{p}.t", partitions)
    seed_plain(clusters, topic, partitions, PER_PARTITION)
    spec_path = write_spec(tmp_path, clusters, p, copy={"max_bytes_per_second": 2700, "window": "12s",
                                                         "lanes_per_task": 1, "max_records_per_partition": 10_000})
    provision(spec_path)
    source_id = clusters.cluster("source").describe_cluster().cluster_id

    first = _windowed_batch(spec_path, cluster_configs)

    total = partitions * PER_PARTITION
    assert first["window_budget_records"] is None  # nothing measured: no budget, the deadline alone
    assert first["stop_reason"] == "deadline" and 0 < first["records_copied"] < total
    rows = {row["partition"]: row for row in first["partitions"]}
    assert sorted(rows) == list(range(partitions))
    assert all(rows[q]["records_copied"] > 0 for q in rows), {q: rows[q]["records_copied"] for q in rows}
    assert all(rows[q]["stop_reason"] == "deadline" for q in rows)
    for q, row in rows.items():  # nothing half done: the destination holds exactly what progress says
        on_destination = clusters.cluster("destination").list_offsets([(topic, q)], "latest")[(topic, q)]
        assert on_destination == row["next_upstream_offset"] == row["records_copied"]

    # the next run resumes every partition where it stopped: every record exactly once
    doc = yaml.safe_load(Path(spec_path).read_text())
    del doc["copy"]["window"], doc["copy"]["max_bytes_per_second"]
    Path(spec_path).write_text(yaml.safe_dump(doc))
    rest = _windowed_batch(spec_path, cluster_configs)
    assert rest["stop_reason"] == "caught_up" and rest["lag_after_total"] == 0 and rest["records_resumed"] == 0
    assert {row["partition"]: row["planned_start"] for row in rest["partitions"]} == {
        q: rows[q]["next_upstream_offset"] for q in rows}
    assert first["records_copied"] + rest["records_copied"] == total
    pairs = assert_copied_exactly_once(clusters, topic, topic, partitions, source_id)
    syncs = read_syncs(clusters, f"dst-{p}", topic)
    for q in range(partitions):
        assert_syncs_exact(syncs[q], pairs[q], PER_PARTITION)


def test_a_window_that_closed_before_the_run_copies_nothing_and_says_why(clusters, tmp_path, work_dir,
                                                                       cluster_configs):
    p = clusters.unique("winx")
    topic = clusters.create_topic("source", f"{p}.t", 1)
    seed_plain(clusters, topic, 1, 20)
    spec_path = write_spec(tmp_path, clusters, p, copy={"window": "1s"})
    provision(spec_path)
    ti = _TI()
    due = datetime.fromtimestamp(datetime.now(UTC).timestamp() - 3600, UTC)  # due an hour ago: window closed
    context = {"ti": ti, "dag_run": SimpleNamespace(run_after=due)}
    summary = ti.xcom["plan_copy"] = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute(context)
    assert summary["empty"] and summary["window_closed"]
    report = CopyReportOperator(task_id="copy_report", spec_path=spec_path).execute(context)
    assert (report["stop_reason"], report["overrun_s"], report["lag_after_total"]) == ("deadline", 0.0, 20)


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["spark-submit", "spark-connect"])
def test_the_rate_limit_reaches_the_copier_on_both_spark_engines_and_the_copy_stays_exact(
        clusters, tmp_path, work_dir, spark_on_path, request, engine):
    spark_conn = clusters.SPARK_CONN if engine == "spark-submit" else request.getfixturevalue("spark_connect")
    p = clusters.unique("rate")
    topic = clusters.create_topic("source", f"{p}.t", 4)
    seed_plain(clusters, topic, 4, 150)
    spec_path = write_spec(tmp_path, clusters, p, copy={"max_records_per_second": 400,
                                                         "max_bytes_per_second": 1_000_000,
                                                         "spark_connection_id": spark_conn})
    provision(spec_path)
    source_id = clusters.cluster("source").describe_cluster().cluster_id

    report = run_batch(spec_path, spark_conn)

    assert report["max_records_per_second"] == 400 and report["max_bytes_per_second"] == 1_000_000
    rows = {(r["source_topic"], r["partition"]): r for r in report["partitions"]}
    assert len(rows) == 4
    # each Spark task (local[2], and a Connect server of 2 cores: two) copied under its share of the limit, by
    # offsets; together at most the limit
    plan = CopyPlan.read(Path(report["report_path"]).with_name(f"plan-{report['batch_id']}.json"))
    groups = task_groups(plan, 2)
    assert len(groups) == 2
    for group in groups:
        share = group_pace(plan, [plan.task_for(t, q) for t, q in group]).limit
        for key in group:
            assert (rows[key]["share_records_per_second"], rows[key]["share_bytes_per_second"]) == (
                share.records_per_second, share.bytes_per_second), rows[key]
    assert sum(rows[g[0]]["share_records_per_second"] for g in groups) <= 400 * (1 + 1e-9)
    assert report["stop_reason"] == "caught_up" and report["lag_after_total"] == 0
    assert_copied_exactly_once(clusters, topic, topic, 4, source_id)
