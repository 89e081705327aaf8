"""A cutover and its rollback from the trigger form, on the production-like stack (PostgreSQL, api-server, scheduler,
dag-processor, triggerer; testbed/airflow_stack.py) in Chromium, as the tenant's operator of issue 35 did it: promote
from the form, producers and a consumer group run on the destination, then rollback from the form. On the source,
every record produced on the destination after the cutover is there once, in order, the aborted transaction absent,
and the group resumes exactly where it stopped on the destination.

Who may cut over (issue 42), on the same promotion: the stack runs the FAB auth manager and the tenants file lists a
role as the tenant's promoters. A user who may trigger the DAG but lacks that role triggers a promote over the REST API
first: refused in its pre-flight, naming the user and the roles the task read through the auth manager's REST API
(with the ``kafka_ferry_auth_api`` connection's service user, who may only read users), both clusters unchanged. The
form's promotion is then the role holder's, her roles read through that API (one promotion serves both checks: CI's
e2e lane cannot afford another)."""

from __future__ import annotations

import json
import os
from urllib.parse import quote

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

from airflow_stack import API_PORT, CHROMIUM, CHROMIUM_ARGS, HOST, AirflowStack
from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.dag_factory import write_stubs

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.e2e]

MODE_LABELS = {"promote": "promote: cut over (needs confirmation)",
               "rollback": "rollback: back to the source after a cutover (needs confirmation)"}
APPROVERS = "kafka-ferry-approvers-acme"  # the role the tenant's promoters list; it grants nothing in Airflow itself
PROMOTER = ("user-approver", "pw-approver-e2e")  # Admin (the form's pages) and the listed role
REFUSED = ("user-nope", "pw-nope-e2e")  # Admin: may trigger the DAG, but holds no listed role
ROLE_READER = ("kferry-role-reader", "pw-role-reader-e2e")  # the auth API connection's user: may read users only


def preflight_log(stack, token: str, dag_id: str, run_id: str) -> str:
    """The pre-flight task's log (its last try: on a loaded machine a try may die starting, before the task's code
    runs, and Airflow retries it), as the REST API gives it."""
    task = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/preflight"
    path = f"{task}/logs/{stack.call('GET', task, token)['try_number']}?full_content=true"
    return json.dumps(stack.call("GET", path, token).get("content"))


def both_clusters(clusters, topic: str, group: str) -> dict:
    """What a refused promotion must not change: the topic's records and the group's offsets on either side."""
    return {side: ({q: [shape(r) for r in read_partition(clusters, side, topic, q)] for q in range(2)},
                   clusters.cluster(side).group_offsets(group)) for side in ("source", "destination")}


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
    # the platform's tenants file binds the spec; only holders of APPROVERS may cut over (issue 42)
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"tenants": {"acme": {
        "spec_paths": [f"dags/migrations/{name}.yaml"], "name_prefixes": [name],
        "connections": [clusters.SOURCE_CONN, clusters.DESTINATION_CONN, clusters.SPARK_CONN],
        "state_topics": [f"kafka-ferry.{name}.state"], "destination_topic_prefixes": [""],
        "promoters": {"roles": [APPROVERS]}}}}))
    env = {k: v for k, v in os.environ.items() if k.startswith("AIRFLOW_CONN_")}
    env["KFERRY_WORK_DIR"] = str(tmp_path / "work")
    env["KFERRY_TENANTS_FILE"] = str(tenants)
    # the task reads a user's roles through the auth manager's API as this connection's user
    env["AIRFLOW_CONN_KAFKA_FERRY_AUTH_API"] = json.dumps({
        "conn_type": "http", "host": HOST, "port": API_PORT, "schema": "http",
        "login": ROLE_READER[0], "password": ROLE_READER[1]})
    ids = {side: clusters.cluster(side).describe_cluster().cluster_id for side in ("source", "destination")}
    with AirflowStack(tmp_path / "airflow", dags, env, auth="fab") as stack:
        token = stack.token()
        stack.wait(lambda: stack.call("GET", f"/api/v2/dags/{dag_id}", token), 300, f"{dag_id} parsed")
        # through FAB's REST API: the listed role, the auth API connection's service user (may read users and no
        # more), the role's holder and a user without it
        stack.call("POST", "/auth/fab/v1/roles", token, {"name": APPROVERS, "actions": []})
        stack.call("POST", "/auth/fab/v1/roles", token, {"name": "kafka-ferry-role-reader", "actions": [
            {"action": {"name": "can_read"}, "resource": {"name": "Users"}}]})
        for user, password, roles in ((*PROMOTER, ["Admin", APPROVERS]), (*REFUSED, ["Admin"]),
                                      (*ROLE_READER, ["kafka-ferry-role-reader"])):
            stack.call("POST", "/auth/fab/v1/users", token, {
                "username": user, "password": password, "email": f"{user}@example.invalid", "first_name": user,
                "last_name": "e2e", "roles": [{"name": r} for r in roles]})
        stack.call("PATCH", f"/api/v2/dags/{dag_id}", token, {"is_paused": False})
        catch_up = stack.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", token,
                              {"logical_date": None, "conf": {"mode": "catch-up"}})
        catch_up = stack.wait(lambda: stack.finished(token, dag_id, catch_up["dag_run_id"]), 600, "the catch-up")
        assert catch_up["state"] == "success", stack.logs()

        # a promote over REST by a user without the listed role: refused in the pre-flight, before any change
        before = both_clusters(clusters, topic, group)
        refused_id = stack.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", stack.token(*REFUSED), {
            "logical_date": None, "conf": {"mode": "promote", "confirm_migration": name}})["dag_run_id"]
        refused = stack.wait(lambda: stack.finished(token, dag_id, refused_id), 600, "the refused promote run")
        refused_tasks = stack.task_states(token, dag_id, refused_id)
        refused_log = preflight_log(stack, token, dag_id, refused_id)
        unchanged = both_clusters(clusters, topic, group) == before

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"{stack.base_url}/dags/{dag_id}")
                page.get_by_label("Username").fill(PROMOTER[0])  # FAB's login page
                page.get_by_label("Password").fill(PROMOTER[1])
                page.get_by_role("button", name="Sign in").click()
                page.wait_for_url(f"**/dags/{dag_id}", timeout=60_000)

                promoted = trigger_from_the_form(stack, page, token, dag_id, "promote", name)
                promoted_log = preflight_log(stack, token, dag_id, promoted["dag_run_id"])
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
    assert refused["triggering_user_name"] == REFUSED[0] and refused["state"] == "failed"
    assert refused_tasks["preflight"] == "failed" and refused_tasks["provision_topics"] != "success"
    assert unchanged  # both clusters: the topic's records and the group's offsets, as before the refused run
    # the refused user's roles were read through the API (a worker cannot read the metadata DB) and are named
    assert (f"promote of migration '{name}' refused before any change: user '{REFUSED[0]}' (roles ['Admin']) is "
            f"not one of tenant 'acme''s promoters (no user, roles ['{APPROVERS}']") in refused_log, refused_log[-4000:]
    # the form's promotion (it succeeded: trigger_from_the_form) is the role holder's, listed only through the role
    assert promoted["triggering_user_name"] == PROMOTER[0] and "refused before any change: user" not in promoted_log
    assert f"roles of user '{PROMOTER[0]}' read through the auth manager's API at http://{HOST}:{API_PORT}: HTTP 200" \
        in promoted_log, promoted_log[-4000:]
