"""Backlog, rate and ETA on the real clusters: the estimate before the first batch (pre-flight and dry run alike),
the backlog each batch records (state kind "backlog" and the report's section), and a batch's live progress."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from scenarios import _TaskInstance, copy_in_process, provision, write_spec

from kafka_ferry.copy.live_progress import batch_view, live_progress_page, publish_progress
from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.copy.plan import work_dir as migration_dir
from kafka_ferry.copy.runner import copy_group
from kafka_ferry.core.common.state_records import BACKLOG_KIND
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.operators.copy import CopyReportOperator, PlanCopyBatchOperator
from kafka_ferry.operators.provision import MigrationPreflightOperator
from kafka_ferry.reports.publish import run_page_path
from kafka_ferry.reports.render import batch_page
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration]

KEY, VALUE = 10, 200  # bytes of every seeded record's key and value: 210 bytes per record, as the copy counts


def seed_sized(clusters, topic: str, partitions: int, per_partition: int) -> None:
    producer = clusters.producer("source")
    for partition in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, key=f"k{partition:02d}-{i:05d}".encode()[:KEY].ljust(KEY, b"."),
                             value=bytes([65 + i % 26]) * VALUE, partition=partition)
    assert producer.flush(30) == 0


def sized_migration(clusters, tmp_path, prefix: str, partitions: int, per_partition: int, **copy):
    p = clusters.unique(prefix)
    topic = clusters.create_topic("source", f"{p}.t", partitions)
    seed_sized(clusters, topic, partitions, per_partition)
    spec_path = write_spec(tmp_path, clusters, p, copy=copy)
    return p, topic, spec_path, load_spec(spec_path)


def test_preflight_and_the_dry_run_give_the_same_estimate_before_the_first_batch(clusters, tmp_path, work_dir):
    _, _, spec_path, spec = sized_migration(clusters, tmp_path, "eta-pre", 3, 50)

    preflight = MigrationPreflightOperator(task_id="preflight", spec_path=spec_path).execute({})["estimate"]
    dry = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path, dry_run=True).execute({})["estimate"]

    assert preflight == dry
    assert preflight["backlog_records"] == 150 and preflight["partitions"] == 3
    assert preflight["bytes_per_record"] == KEY + VALUE  # from a bounded sample of the source's records
    assert preflight["backlog_bytes"] == 150 * (KEY + VALUE)
    assert preflight["bytes_per_record_from"].startswith("a sample of ")
    assert "no rate measured yet" in preflight["etas"][0]["sentence"]
    # a dry run of a migration that never ran changes nothing: no state topic, no mirror
    assert spec.state_topic_name not in clusters.cluster("destination").list_topic_names()


def _batch(spec_path: str, configs_env: str) -> dict:
    ti = _TaskInstance()
    ti.xcom["plan_copy"] = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({"ti": ti})
    planned = ti.xcom["plan_copy"]
    assert isinstance(planned, dict)
    done = copy_in_process(planned["plan_path"], configs_env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    CopyReportOperator(task_id="copy_report", spec_path=spec_path).execute({"ti": ti})
    return json.loads(Path(planned["report_path"]).read_text())


def test_each_batch_records_backlog_rate_and_eta(clusters, tmp_path, work_dir, configs_env):
    _, _, spec_path, spec = sized_migration(clusters, tmp_path, "eta-run", 3, 50, max_records_per_partition=20)
    provision(spec_path)

    first = _batch(spec_path, configs_env)
    second = _batch(spec_path, configs_env)

    one, two = first["backlog"], second["backlog"]
    assert (one["backlog_before"], one["backlog_after"], one["records_copied"]) == (150, 90, 60)
    assert (two["backlog_before"], two["backlog_after"], two["records_copied"]) == (90, 30, 60)
    assert one["bytes_per_record"] == KEY + VALUE and one["bytes_estimated"] is True
    assert (one["backlog_bytes_before"], one["backlog_bytes_after"]) == (150 * 210, 90 * 210)
    assert two["copy_records_per_s"] > 0
    counted, measured = two["etas"][0], two["etas"][1]
    assert measured["label"].startswith("at the measured rate")
    assert measured["seconds"] > 0 and "lag 0 in" in measured["sentence"], measured
    # first, the ETA counted in batches: 10 left per partition, at most 20 a batch: one more batch
    assert counted["label"].startswith("counting batches (at most 20 records per partition each, ")
    assert counted["batches"] == 1 and counted["seconds"] > 0, counted
    assert two["inflow_records_per_s"] == 0  # nothing was produced between the batches
    assert [h["backlog_after"] for h in two["history"]] == [90, 30]

    stored = MigrationStateStore(clusters.cluster("destination"), spec.state_topic_name).read_kind(BACKLOG_KIND)
    assert stored[second["batch_id"]]["etas"] == two["etas"]
    assert stored[first["batch_id"]]["backlog_after"] == 90

    html = batch_page(second, [], [first, second], "manual__2")
    assert "Backlog and ETA" in html and measured["sentence"].split(":")[0] in html
    assert html.count("<svg") == 2  # the lag chart and the backlog chart


def test_a_running_batchs_page_shows_the_partitions_copied_so_far(clusters, tmp_path, work_dir, cluster_configs):
    _, topic, spec_path, spec = sized_migration(clusters, tmp_path, "eta-live", 4, 30)
    provision(spec_path)
    summary = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})
    plan = CopyPlan.read(summary["plan_path"])
    store = MigrationStateStore(clusters.cluster("destination"), spec.state_topic_name)
    page = run_page_path(migration_dir(spec.name), "manual__live")
    started_at_ms = int(time.time() * 1000)

    with live_progress_page(plan, store, migration_dir(spec.name), "manual__live", interval_s=3600) as written:
        assert written.wait(60), "no page written"  # the first page, before the batch's first record
        before = page.read_text()
        # half the batch, copied by the real copier: partitions 0 and 1 record their progress, 2 and 3 none yet
        copy_group(plan, [plan.task_for(topic, 0), plan.task_for(topic, 1)], cluster_configs)
        publish_progress(plan, store, migration_dir(spec.name), "manual__live", started_at_ms)
        during = page.read_text()
        view = batch_view(plan, store, started_at_ms)

    assert "0 of 4 partitions finished: no rate yet" in before
    rows = {r["partition"]: r for r in view["rows"]}
    assert [(rows[p]["status"], rows[p]["copied"]) for p in range(4)] == [
        ("finished", 30), ("finished", 30), ("copying or waiting", 0), ("copying or waiting", 0)]
    assert (view["copied"], view["planned"], view["partitions_done"]) == (60, 120, 2)
    assert view["records_per_s"] > 0 and view["remaining_s"] > 0
    assert "2 of 4 partitions finished, 60 of 120 offsets copied at" in during
    assert "the batch&#x27;s end in about" in during or "the batch's end in about" in during
    assert f"batch {plan.batch_id} in progress" in during


CHROMIUM = os.environ.get("KFERRY_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SCREENSHOTS = os.environ.get("KFERRY_SCREENSHOTS")  # e.g. docs/screenshots: where the manual's pictures come from


def test_run_page_overview_and_a_running_batch_in_a_browser(clusters, tmp_path, work_dir, configs_env,
                                                            cluster_configs, monkeypatch):
    from playwright.sync_api import sync_playwright

    from kafka_ferry.copy import backlog as copy_backlog
    from kafka_ferry.plugin import overview_html
    from kafka_ferry.reports.publish import publish_batch_run
    from kafka_ferry.state.batches import batch_history

    # Stands in for copy.max_records_per_second and copy.window (issue 27's rate branch): the ETA at the limit,
    # in windows, is drawn from the spec's keys through spec_limits.
    monkeypatch.setattr(copy_backlog, "spec_limits",
                        lambda spec: {"max_bytes_per_s": None, "max_records_per_s": 400, "window_s": 60.0,
                                         "cycle_s": None})
    _, topic, spec_path, spec = sized_migration(clusters, tmp_path, "eta-ui", 4, 400, max_records_per_partition=60)
    provision(spec_path)
    store = MigrationStateStore(clusters.cluster("destination"), spec.state_topic_name)
    reports = []
    for _ in range(3):
        reports.append(_batch(spec_path, configs_env))
        seed_sized(clusters, topic, 4, 10)  # producers keep writing between the runs: the inflow is measured
    last = reports[-1]
    publish_batch_run(spec, migration_dir(spec.name), "scheduled__run-3", last, [], batch_history(store))
    overview = tmp_path / "overview.html"
    # as the plugin serves it: the rows this user may read, each with the chart stored when its row was written
    overview.write_text(overview_html(migration_dir(spec.name).parent, {spec.dag_id}))
    # a fourth batch, half copied: its live page
    summary = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})
    plan = CopyPlan.read(summary["plan_path"])
    started_at_ms = int(time.time() * 1000)
    copy_group(plan, [plan.task_for(topic, 0), plan.task_for(topic, 1)], cluster_configs)
    live = publish_progress(plan, store, migration_dir(spec.name), "scheduled__run-4", started_at_ms)

    shots = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.goto(run_page_path(migration_dir(spec.name), "scheduled__run-3").as_uri())
            text = page.inner_text("body")
            assert "Backlog and ETA" in text and "at 400 records/s: lag 0 in" in text and "window" in text, text
            assert page.locator("svg").count() == 2  # the lag chart and the backlog chart
            page.locator("h2", has_text="Backlog and ETA").scroll_into_view_if_needed()
            page.screenshot(path=str(shots / "run-report-backlog.png"), full_page=True)
            page.goto(overview.as_uri())
            text = page.inner_text("body")
            assert f"{spec.name}: {last['backlog']['sentence']}" in text and page.locator("svg").count() == 1
            page.screenshot(path=str(shots / "migrations-overview-backlog.png"), full_page=True)
            page.goto(live.as_uri())
            text = page.inner_text("body")
            assert "2 of 4 partitions finished" in text and "the batch's end in about" in text, text
            page.screenshot(path=str(shots / "run-report-live.png"), full_page=True)
        finally:
            browser.close()
    assert last["backlog"]["inflow_records_per_s"] > 0
    assert [r["backlog"]["backlog_after"] for r in reports] == [1600 - 240 + 0, 1600 - 480 + 40, 1600 - 720 + 80]


@pytest.mark.spark
def test_the_copy_task_writes_the_run_page_of_its_batch_while_it_runs(clusters, tmp_path, work_dir, spark_on_path):
    """The operator's wiring: spark-submit's copy task publishes the batch's live page (at once, then every 10 s)."""
    from scenarios import run_batch

    _, topic, spec_path, spec = sized_migration(clusters, tmp_path, "eta-task", 2, 20)
    provision(spec_path)

    report = run_batch(spec_path, clusters.SPARK_CONN)

    html = run_page_path(migration_dir(spec.name), report["batch_id"]).read_text()  # run id: the batch id here
    assert f"batch {report['batch_id']} in progress" in html and "Partitions of this batch" in html
    assert html.count(f"<td class=\"l\">{topic}</td>") == 2  # both planned partitions, whatever they had copied
    assert report["records_copied"] == 40 and report["backlog"]["backlog_after"] == 0
    # a batch that caught up measures no copy rate (core/batches/copy_rate.py: only batches a deadline or a limit
    # stopped)
    sentences = [e["sentence"] for e in report["backlog"]["etas"]]
    assert "at the measured rate: lag is 0 (caught up)" in sentences, sentences
    assert sentences[0].startswith("counting batches (") and sentences[0].endswith(": lag is 0 (caught up)")
    assert report["backlog"]["copy_records_per_s"] is None
