"""A cutover and its rollback from the trigger form, on the production-like stack (PostgreSQL, api-server, scheduler,
dag-processor, triggerer; testbed/airflow_stack.py) in Chromium, as the tenant's operator of issue 35 did it: promote
from the form, producers and a consumer group run on the destination, then rollback from the form. On the source,
every record produced on the destination after the cutover is there once, in order, the aborted transaction absent,
and the group resumes exactly where it stopped on the destination."""

from __future__ import annotations

import os

import pytest
import yaml
from scenarios import (
    commit_source_group,
    consume_some,
    read_on_as_group,
    read_partition,
    remaining,
    seed_plain,
    shape,
)

from airflow_stack import CHROMIUM, CHROMIUM_ARGS, AirflowStack
from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.dag_factory import write_stubs

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.e2e]

MODE_LABELS = {"promote": "promote: cut over (needs confirmation)",
               "rollback": "rollback: back to the source after a cutover (needs confirmation)"}




def trigger_from_the_form(stack, page, token, dag_id: str, mode: str, name: str) -> dict:
    """Open the DAG's trigger form, choose ``mode``, type the migration's name to confirm, trigger; the finished run."""
    before = {r["dag_run_id"] for r in stack.runs(token, dag_id)}
    page.goto(f"{stack.base_url}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Run", exact=True).click()
    dialog.get_by_text("catch-up: copy the next batch").wait_for()
    # the mode is a searchable dropdown (element_<field>): type the choice's label, take it with Enter
    choice = dialog.locator("#element_mode input").first
    choice.fill(MODE_LABELS[mode])
    choice.press("Enter")
    dialog.get_by_text(MODE_LABELS[mode], exact=True).wait_for()
    dialog.get_by_role("button", name="Promotion").click()
    dialog.locator("#element_confirm_migration").fill(name)
    dialog.get_by_role("button", name="Trigger", exact=True).click()
    run = stack.wait(lambda: next((r for r in stack.runs(token, dag_id) if r["dag_run_id"] not in before), None),
                     60, f"the {mode} run the form triggered")
    run = stack.wait(lambda: stack.finished(token, dag_id, run["dag_run_id"]), 900, f"the {mode} run")
    assert run["conf"]["mode"] == mode and run["conf"]["confirm_migration"] == name, run["conf"]
    assert run["state"] == "success", (stack.task_states(token, dag_id, run["dag_run_id"]), stack.logs())
    return run


def after_the_cutover(clusters, topic: str) -> None:
    """Producers on the destination: plain records, a committed and an aborted transaction."""
    plain = clusters.producer("destination", **{"enable.idempotence": True})
    for q in range(2):
        for i in range(6):
            plain.produce(topic, key=f"d{i}".encode(), value=f"dest-{q}-{i}".encode(), partition=q,
                          headers=[("h", f"{q}-{i}".encode())])
    assert plain.flush(30) == 0
    txn = clusters.producer("destination", **{"transactional.id": f"{topic}-form"})
    txn.init_transactions(30)
    for commit in (True, False):
        txn.begin_transaction()
        for q in range(2):
            txn.produce(topic, value=f"{'committed' if commit else 'aborted'}-{q}".encode(), partition=q)
        (txn.commit_transaction if commit else txn.abort_transaction)(30)


def test_promote_then_rollback_from_the_trigger_form(clusters, tmp_path):
    from playwright.sync_api import sync_playwright

    from airflow_stack import PASSWORD, USER

    name = clusters.unique("e2erb")
    topic = clusters.create_topic("source", f"{name}.orders", 2)
    seed_plain(clusters, topic, 2, 30)
    group = f"{name}-g"
    commit_source_group(clusters, group, {(topic, 0): 11, (topic, 1): 17})
    dags = tmp_path / "dags"
    (dags / "migrations").mkdir(parents=True)
    (dags / "migrations" / f"{name}.yaml").write_text(yaml.safe_dump({
        "name": name, "tenant": "acme",
        "source": {"connection_id": clusters.SOURCE_CONN, "alias": "src"},
        "destination": {"connection_id": clusters.DESTINATION_CONN, "alias": f"dst-{name}"},
        "topics": {"include": [f"{name}\\..*"]}, "groups": {"include": [f"{name}-.*"]},
        "copy": {"spark_connection_id": clusters.SPARK_CONN},
        "promotion": {"quiesce_window_seconds": 2, "poke_interval_seconds": 2}}))
    write_stubs(dags)
    dag_id = f"kafka_ferry__{name}"
    env = {k: v for k, v in os.environ.items() if k.startswith("AIRFLOW_CONN_")}
    env["KFERRY_WORK_DIR"] = str(tmp_path / "work")
    ids = {side: clusters.cluster(side).describe_cluster().cluster_id for side in ("source", "destination")}
    with AirflowStack(tmp_path / "airflow", dags, env) as stack:
        token = stack.token()
        stack.wait(lambda: stack.call("GET", f"/api/v2/dags/{dag_id}", token), 300, f"{dag_id} parsed")
        stack.call("PATCH", f"/api/v2/dags/{dag_id}", token, {"is_paused": False})
        catch_up = stack.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", token,
                              {"logical_date": None, "conf": {"mode": "catch-up"}})
        catch_up = stack.wait(lambda: stack.finished(token, dag_id, catch_up["dag_run_id"]), 600, "the catch-up")
        assert catch_up["state"] == "success", stack.logs()

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"{stack.base_url}/dags/{dag_id}")
                page.get_by_label("Username").fill(USER)
                page.get_by_label("Password").fill(PASSWORD)
                page.get_by_role("button", name="Sign in").click()
                page.wait_for_url(f"**/dags/{dag_id}", timeout=60_000)

                trigger_from_the_form(stack, page, token, dag_id, "promote", name)
                after_the_cutover(clusters, topic)
                consume_some(clusters, "destination", group, topic, {0: 25, 1: None})  # into the new records of 0
                expected = remaining(clusters, "destination", group, topic)
                post = {q: [shape(r) for r in read_partition(clusters, "destination", topic, q)
                            if read_provenance(r.headers)[0] != ids["source"]] for q in range(2)}
                assert all(len(rows) == 6 + 1 for rows in post.values())  # the aborted records are no records

                trigger_from_the_form(stack, page, token, dag_id, "rollback", name)
            finally:
                browser.close()

    back = {q: [shape(r) for r in read_partition(clusters, "source", topic, q)
                if read_provenance(r.headers)[0] == ids["destination"]] for q in range(2)}
    assert back == post  # every record produced on the destination once, in order; the aborted ones absent
    assert read_on_as_group(clusters, group, topic) == expected  # the group resumes exactly where it stopped
