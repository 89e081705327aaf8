"""End to end on a production-like stack: PostgreSQL, api-server, scheduler, dag-processor, triggerer
(LocalExecutor), the real Kafka test bed and Spark local[2]; a browser drives the UI as a tenant would.

One scenario, in the order a platform team meets it: the tenant's DAG runs on its cron schedule with no
trigger; a manual trigger during that run waits (max_active_runs=1); bad trigger input changes nothing;
then in Chromium: log in, open the DAG, fill the trigger form for a catch-up, run it, open the run's report
tab; screenshots go to the test's temp dir (`make screenshots` writes docs/screenshots/). The work dir is in
object storage (the test bed's SeaweedFS, through an Airflow connection): the API server shares no volume with the
workers and renders both pages from the bucket.
A copy marked failed while it runs ends with nothing of its spark-submit left, and the next run copies the rest.
Last, a confirmed promotion, whose asset event runs the downstream team's DAG scheduled on the promoted topic
(dags/examples/post_cutover_check.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import urllib.error
import urllib.parse
from pathlib import Path

import pytest
import yaml
from scenarios import seed_plain

from airflow_stack import CHROMIUM, CHROMIUM_ARGS, AirflowStack
from kafka_ferry.core.specs.trigger_form import CONFIRM_FIELD
from kafka_ferry.dag_factory import write_stubs

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
# Where the pictures go: the test's own temp dir, so a test run never rewrites the manual's pictures in the checkout;
# `make screenshots` names docs/screenshots here to refresh them.
SCREENSHOTS = os.environ.get("KFERRY_SCREENSHOTS")




@pytest.fixture
def tenant(clusters, tmp_path):
    name = clusters.unique("e2e")
    topic = clusters.create_topic("source", f"{name}.orders", 3)
    seed_plain(clusters, topic, 3, 400)
    dags = tmp_path / "dags"
    (dags / "migrations").mkdir(parents=True)
    (dags / "migrations" / f"{name}.yaml").write_text(yaml.safe_dump({
        "name": name, "tenant": "acme", "schedule": "*/1 * * * *",
        "source": {"connection_id": clusters.SOURCE_CONN, "alias": "src"},
        "destination": {"connection_id": clusters.DESTINATION_CONN, "alias": f"dst-{name}"},
        # the tenant has no consumer group yet: an empty group selection is intended (pre-flight refuses one otherwise)
        "topics": {"include": [f"{name}\\..*"]}, "groups": {"include": [f"{name}-.*"], "allow_empty": True},
        "copy": {"spark_connection_id": clusters.SPARK_CONN},
        "promotion": {"quiesce_window_seconds": 2, "poke_interval_seconds": 2}}))
    write_stubs(dags)
    # the downstream team's DAG, scheduled on the mirror topic's Asset (dags/examples/, pointed at this topic)
    (dags / "examples").mkdir()
    shutil.copy(REPO / "dags" / "examples" / "post_cutover_check.py", dags / "examples")
    return name, f"kafka_ferry__{name}", dags


@pytest.mark.timeout(1200)  # the whole scenario, a killed copy and its resumption included: past the default
def test_a_tenant_migration_on_the_real_stack(clusters, tenant, tmp_path, s3_work_dir):
    name, dag_id, dags = tenant
    s3_env, fs, root = s3_work_dir
    env = {k: v for k, v in os.environ.items() if k.startswith("AIRFLOW_CONN_")}
    env |= {"KFERRY_EXAMPLE_BOOTSTRAP": clusters.destination_bootstrap, "KFERRY_EXAMPLE_TOPIC": f"{name}.orders"}
    with AirflowStack(tmp_path / "airflow", dags, {**env, **s3_env}) as stack:
        token = stack.token()
        stack.wait(lambda: stack.call("GET", f"/api/v2/dags/{dag_id}", token), 300, f"{dag_id} parsed")
        stack.call("PATCH", f"/api/v2/dags/{dag_id}", token, {"is_paused": False})

        # 1. The schedule starts a run with no trigger; a manual trigger meanwhile waits its turn.
        scheduled = stack.wait(lambda: next((r for r in stack.runs(token, dag_id)
                                             if r["run_type"] == "scheduled"), None), 180, "a scheduled run")
        manual = stack.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", token,
                            {"logical_date": None, "conf": {"mode": "catch-up"}})
        scheduled = stack.wait(lambda: stack.finished(token, dag_id, scheduled["dag_run_id"]), 600,
                               "the scheduled run finished")
        manual = stack.wait(lambda: stack.finished(token, dag_id, manual["dag_run_id"]), 600,
                            "the manual run finished")
        assert scheduled["state"] == manual["state"] == "success", stack.logs()
        assert manual["start_date"] >= scheduled["end_date"], (scheduled, manual)  # never overlapped
        first = json.loads(fs.cat(f"{root}/work/{name}/overview.json"))
        assert first["lag"] == 0 and first["dag_id"] == dag_id

        # 1b. A copy marked failed in the UI while it runs: the worker kills the task, and nothing of its spark-submit
        # lives on; the next run copies the rest, every record once.
        copy_killed_mid_batch(stack, token, clusters, dags, name, dag_id)

        # 2. Bad input changes nothing: an unknown mode is refused by the API, an unconfirmed promote by pre-flight.
        stack.call("PATCH", f"/api/v2/dags/{dag_id}", token, {"is_paused": True})  # no more scheduled runs
        with pytest.raises(urllib.error.HTTPError) as refused:
            stack.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", token, {"logical_date": None,
                                                                          "conf": {"mode": "yolo"}})
        assert refused.value.code == 400
        stack.call("PATCH", f"/api/v2/dags/{dag_id}", token, {"is_paused": False})
        promote = stack.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", token,
                             {"logical_date": None, "conf": {"mode": "promote"}})
        promote = stack.wait(lambda: stack.finished(token, dag_id, promote["dag_run_id"]), 300, "promote refused")
        states = stack.task_states(token, dag_id, promote["dag_run_id"])
        assert promote["state"] == "failed" and states["preflight"] == "failed"
        assert states["provision_topics"] == "upstream_failed"
        stack.call("PATCH", f"/api/v2/dags/{dag_id}", token, {"is_paused": True})

        # 3. The tenant's view in a browser.
        report = browse(stack, dag_id, name, Path(SCREENSHOTS) if SCREENSHOTS else tmp_path / "screenshots")
        assert report["lag_after_total"] == 0
        assert not (tmp_path / "airflow" / "kafka-ferry").exists()  # no local work dir: all of it is in the bucket

        # 4. The confirmed promotion's asset event runs the downstream team's DAG scheduled on the promoted topic.
        promoted_topic_runs(stack, token, dag_id, name, clusters.destination_bootstrap)


def promoted_topic_runs(stack, token, dag_id: str, name: str, destination_bootstrap: str) -> None:
    check = "kafka_ferry_example_post_cutover_check"
    stack.wait(lambda: stack.call("GET", f"/api/v2/dags/{check}", token), 300, f"{check} parsed")
    stack.call("PATCH", f"/api/v2/dags/{check}", token, {"is_paused": False})
    stack.call("PATCH", f"/api/v2/dags/{dag_id}", token, {"is_paused": False})
    promote = stack.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", token,
                         {"logical_date": None, "conf": {"mode": "promote", CONFIRM_FIELD: name}})
    promote = stack.wait(lambda: stack.finished(token, dag_id, promote["dag_run_id"]), 600, "the promotion")
    assert promote["state"] == "success", (stack.task_states(token, dag_id, promote["dag_run_id"]), stack.logs())
    stack.call("PATCH", f"/api/v2/dags/{dag_id}", token, {"is_paused": True})

    def checked() -> dict | None:  # catch-up copies wake the DAG too; their runs short-circuit before the check
        for run in stack.runs(token, check):
            if stack.finished(token, check, run["dag_run_id"]) and \
                    stack.task_states(token, check, run["dag_run_id"]).get("check_cutover") == "success":
                return run
        return None

    run = stack.wait(checked, 300, "the downstream check the promotion's asset event triggered")
    assert run["run_type"] == "asset_triggered", run
    path = (f"/api/v2/dags/{check}/dagRuns/{urllib.parse.quote(run['dag_run_id'], safe='')}"
            "/taskInstances/check_cutover/xcomEntries/return_value")
    value = stack.call("GET", path, token)["value"]
    value = json.loads(value) if isinstance(value, str) else value
    first = destination_bootstrap.split(",")[0]
    assert value["uri"] == f"kafka://{first}/{name}.orders" and value["migration"] == name, value
    # 400 records per partition, and 400 more that a killed copy began and the next run finished
    assert sorted(value["offsets"]) == ["0", "1", "2"] and all(o[0] == 800 for o in value["offsets"].values())


def copy_killed_mid_batch(stack, token: str, clusters, dags: Path, name: str, dag_id: str) -> None:
    """400 new records per partition, copied at 20 records/s (the spec's rate limit, for this step only: long enough
    to catch the copy running); once its spark-submit has started the Python driver and the executors' Python
    workers, the copy task is marked failed through the REST API, as the UI's "Mark as failed" does. Nothing of that
    spark-submit may outlive the task: the worker's supervisor signals the task's process group (this Airflow's
    Task SDK), and the copy's ``on_kill`` ends every process below spark-submit (what a stop of `kafka-ferry`, whose
    tasks run in its own process, relies on). The next run, with no rate limit, copies the rest: the destination then
    holds each partition's 800 records, each once."""
    import psutil

    spec_path = dags / "migrations" / f"{name}.yaml"
    spec = yaml.safe_load(spec_path.read_text())
    # The DAG stays unpaused (a run in flight when its DAG is paused gets no further task until it is unpaused):
    # whichever run plans the new records, scheduled or this manual one, copies them at the limit.
    spec_path.write_text(yaml.safe_dump({**spec, "copy": {**spec["copy"], "max_records_per_second": 20}}))
    seed_plain(clusters, f"{name}.orders", 3, 400, start=400)
    stack.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", token, {"logical_date": None, "conf": {"mode": "catch-up"}})

    def tree() -> list | None:
        """The copy's spark-submit JVM and what it started, once the driver and a Python worker run."""
        for process in psutil.process_iter():
            try:
                args = process.cmdline()
                if "org.apache.spark.deploy.SparkSubmit" in args and \
                        any(a.startswith(f"kafka-ferry {name} ") for a in args):
                    below = process.children(recursive=True)
                    if any("pyspark.daemon" in " ".join(_args(p)) for p in below):
                        return [process, *below]
            except psutil.Error:
                continue
        return None

    try:
        killed = stack.wait(tree, 300, "the copy's spark-submit with its driver and Python workers")
    except TimeoutError:
        runs = {r["dag_run_id"]: (r["state"], stack.task_states(token, dag_id, r["dag_run_id"]))
                for r in stack.runs(token, dag_id)}
        raise AssertionError(f"no copy's spark-submit seen with its driver and workers; runs: {runs}\n"
                             f"{stack.logs()[-20000:]}") from None
    running = stack.wait(lambda: next((r for r in stack.runs(token, dag_id) if r["state"] == "running"
                                       and stack.task_states(token, dag_id, r["dag_run_id"]).get("copy_batch")
                                       == "running"), None), 60, "the run whose copy_batch runs")
    quoted = urllib.parse.quote(running["dag_run_id"], safe="")
    stack.call("PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{quoted}/taskInstances/copy_batch", token,
               {"new_state": "failed"})
    spec_path.write_text(yaml.safe_dump(spec))  # the next run copies at full speed
    failed = stack.wait(lambda: stack.finished(token, dag_id, running["dag_run_id"]), 300, "the marked run's end")
    assert failed["state"] == "failed", failed

    def alive() -> list[str]:
        out = []
        for process in killed:
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    out.append(f"{process.pid} {' '.join(_args(process))[:200]}")
            except psutil.NoSuchProcess:
                continue
        return out

    try:
        stack.wait(lambda: not alive(), 120, "the killed copy's processes gone")
    except TimeoutError:
        raise AssertionError(f"processes of the killed copy outlived its task: {alive()}\n{stack.logs()}") from None
    finally:
        for process in killed:  # whatever happened, nothing of it outlives the test
            with contextlib.suppress(psutil.Error):
                process.kill()

    def caught_up() -> dict | None:  # a run that started after the killed one ended, and succeeded
        done = [stack.finished(token, dag_id, r["dag_run_id"]) for r in stack.runs(token, dag_id)
                if (r["start_date"] or "") >= failed["end_date"]]
        return next((r for r in done if r and r["state"] == "success"), None)

    stack.wait(caught_up, 600, "a run after the killed one")


def _args(process) -> list[str]:
    """A process's command line; none for one that is gone or a zombie (the JVM keeps one unreaped)."""
    import psutil

    try:
        return process.cmdline()
    except psutil.Error:
        return []


def browse(stack, dag_id: str, name: str, shots: Path) -> dict:
    """Log in, open the DAG, trigger a catch-up from the form, open the run's report tab and the overview.

    Returns the batch report of the run the form triggered.
    """
    from playwright.sync_api import sync_playwright

    from airflow_stack import PASSWORD, USER

    shots.mkdir(parents=True, exist_ok=True)
    token = stack.token()
    before = {r["dag_run_id"] for r in stack.runs(token, dag_id)}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{stack.base_url}/dags/{dag_id}")
            page.get_by_label("Username").fill(USER)
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(f"**/dags/{dag_id}", timeout=60_000)
            page.get_by_role("button", name="Trigger").first.click()
            dialog = page.get_by_role("dialog")
            dialog.get_by_role("button", name="Run", exact=True).click()
            dialog.get_by_text("catch-up: copy the next batch").wait_for()
            dialog.get_by_role("button", name="Promotion").click()
            dialog.get_by_text("Confirm promotion").wait_for()
            page.screenshot(path=str(shots / "trigger-form.png"))
            dialog.get_by_role("button", name="Trigger", exact=True).click()

            run = stack.wait(lambda: next((r for r in stack.runs(token, dag_id) if r["dag_run_id"] not in before),
                                          None), 60, "the run the form triggered")
            run = stack.wait(lambda: stack.finished(token, dag_id, run["dag_run_id"]), 600, "the form's run")
            plan = stack.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run['dag_run_id'], safe='')}"
                                     "/taskInstances/plan_copy/xcomEntries/return_value", token)["value"]
            # the form sends what it shows; the mode left at its default is catch-up either way
            assert run["state"] == "success" and run["conf"].get("mode", "catch-up") == "catch-up", run
            quoted = urllib.parse.quote(run["dag_run_id"], safe="")

            page.goto(f"{stack.base_url}/dags/{dag_id}/runs/{quoted}")
            page.wait_for_load_state("networkidle")
            page.get_by_text("Migration report", exact=True).click()
            page.wait_for_load_state("networkidle")
            # the UI shows the plugin's page inside the run view (in a frame): find the frame showing our report
            try:
                stack.wait(lambda: any(f"{name}: batch" in _text(f) for f in page.frames), 60, "the report tab")
            except TimeoutError:
                page.screenshot(path=str(shots / "run-report-tab-failed.png"))
                raise AssertionError(f"no frame shows the report; frames: {[f.url for f in page.frames]}") from None
            page.wait_for_timeout(1000)
            page.screenshot(path=str(shots / "run-report-tab.png"))

            page.goto(f"{stack.base_url}/kafka-ferry/runs/{dag_id}/{quoted}")
            assert "Consumer groups: source" in page.content() and "<svg" in page.content()
            page.screenshot(path=str(shots / "run-report.png"), full_page=True)

            page.goto(f"{stack.base_url}/kafka-ferry/")
            assert dag_id in page.content() and "acme" in page.content()
            page.screenshot(path=str(shots / "migrations-overview.png"))
        finally:
            browser.close()
    from kafka_ferry.storage.workdir import as_path, read_text

    assert plan["report_path"].startswith("s3://"), plan  # the report the pages show is the bucket's
    return json.loads(read_text(as_path(plan["report_path"])))


def _text(frame) -> str:
    try:
        return frame.content()
    except Exception:  # noqa: BLE001 - a frame still navigating has no content yet
        return ""
