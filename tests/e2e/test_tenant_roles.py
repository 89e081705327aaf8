"""Tenant separation on the real stack with a real auth manager (issue 36 case 9): the FAB provider's, whose roles
carry per-DAG permissions. A user of tenant A may read A's report pages and trigger A's DAG; B's report page
answers 403 and B's DAG cannot be triggered (Airflow's SimpleAuthManager, the stack's auth manager before, has no
per-DAG roles: every user saw every DAG). And who may cut over (issue 42): tenant A's promoters list user-a, whose
promotion, triggered through the REST API, passes that check. The refusal of a user not listed and the pass of one
listed through a role (her roles read through the auth manager's REST API with the ``kafka_ferry_auth_api``
connection) are checked on the promotion test_rollback_from_the_form.py already runs: CI's e2e lane cannot afford
more promotions here.
"""

from __future__ import annotations

import json
import urllib.error
from urllib.parse import quote

import pytest
import yaml

from airflow_stack import AirflowStack
from kafka_ferry.core.specs.trigger_form import DRY_RUN
from kafka_ferry.dag_factory import write_stubs

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.e2e]

TENANT_PERMISSIONS = {"DAG Runs": ("can_read", "can_create")}  # with the tenant's own DAG:<id> read and edit
APPROVERS = "kafka-ferry-approvers-a"  # a role tenant a's promoters list (user-a passes by name, not through it)


def status(stack: AirflowStack, method: str, path: str, token: str, body: dict | None = None) -> int:
    try:
        stack.call(method, path, token, body)
    except urllib.error.HTTPError as exc:
        return exc.code
    return 200


def preflight_log(stack: AirflowStack, token: str, dag_id: str, run_id: str) -> str:
    """The pre-flight task's log (its last try: on a loaded machine a try may die starting, before the task's code
    runs, and Airflow retries it), as the REST API gives it."""
    task = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/preflight"
    path = f"{task}/logs/{stack.call('GET', task, token)['try_number']}?full_content=true"
    return json.dumps(stack.call("GET", path, token).get("content"))


@pytest.mark.timeout(1200)  # a promote run and a dozen `airflow` commands: past the default on a loaded box
def test_a_tenant_user_reaches_only_its_own_dags_pages_and_triggers(clusters, tmp_path):
    names = {t: clusters.unique(f"role{t}") for t in ("a", "b")}
    dags = tmp_path / "dags"
    (dags / "migrations").mkdir(parents=True)
    for tenant, name in names.items():
        (dags / "migrations" / f"{name}.yaml").write_text(yaml.safe_dump({
            "name": name, "tenant": f"tenant-{tenant}",
            "source": {"connection_id": clusters.SOURCE_CONN, "alias": "src"},
            "destination": {"connection_id": clusters.DESTINATION_CONN, "alias": f"dst-{name}"},
            "topics": {"include": [f"{name}\\..*"]}, "copy": {"spark_connection_id": clusters.SPARK_CONN}}))
    # the platform's tenants file binds each spec; tenant a lets only user-a cut over (issue 42)
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"tenants": {f"tenant-{t}": {
        "spec_paths": [f"dags/migrations/{name}.yaml"], "name_prefixes": [name],
        "connections": [clusters.SOURCE_CONN, clusters.DESTINATION_CONN, clusters.SPARK_CONN],
        "state_topics": [f"kafka-ferry.{name}.state"], "destination_topic_prefixes": [""],
        **({"promoters": {"users": ["user-a"], "roles": [APPROVERS]}} if t == "a" else {})}
        for t, name in names.items()}}))
    write_stubs(dags)
    dag_ids = {t: f"kafka_ferry__{n}" for t, n in names.items()}
    env = {"KFERRY_WORK_DIR": str(tmp_path / "work"), "KFERRY_TENANTS_FILE": str(tenants)}
    with AirflowStack(tmp_path / "airflow", dags, env, auth="fab") as stack:
        admin = stack.token()
        stack.wait(lambda: {d["dag_id"] for d in stack.call("GET", "/api/v2/dags", admin)["dags"]}
                   >= set(dag_ids.values()), 300, "both DAGs parsed")
        stack.airflow("sync-perm", "--include-dags")  # the per-DAG resources (DAG:<dag_id>) exist from here
        for tenant, dag_id in dag_ids.items():
            role = f"kafka-ferry-tenant-{tenant}"
            stack.airflow("roles", "create", role)
            stack.airflow("roles", "add-perms", role, "-r", f"DAG:{dag_id}", "-a", "can_read", "can_edit")
            for resource, actions in TENANT_PERMISSIONS.items():
                stack.airflow("roles", "add-perms", role, "-r", resource, "-a", *actions)
            stack.add_user(f"user-{tenant}", f"pw-{tenant}-e2e", role)
        token = stack.token("user-a", "pw-a-e2e")

        own = status(stack, "GET", f"/kafka-ferry/runs/{dag_ids['a']}/manual__1", token)
        other = status(stack, "GET", f"/kafka-ferry/runs/{dag_ids['b']}/manual__1", token)
        listed = {d["dag_id"] for d in stack.call("GET", "/api/v2/dags", token)["dags"]}
        trigger = {"logical_date": None, "conf": {"mode": DRY_RUN}}  # the DAGs stay paused: nothing runs
        trigger_other = status(stack, "POST", f"/api/v2/dags/{dag_ids['b']}/dagRuns", token, trigger)
        trigger_own = status(stack, "POST", f"/api/v2/dags/{dag_ids['a']}/dagRuns", token, trigger)
        runs_of_b = stack.call("GET", f"/api/v2/dags/{dag_ids['b']}/dagRuns", admin)["dag_runs"]

        # who may cut over (issue 42): user-a's promotion passes that check (and stops at the next: nothing was
        # copied yet)
        for run in stack.runs(admin, dag_ids["a"]):  # the dry run above: the DAG was paused, it never ran
            stack.call("DELETE", f"/api/v2/dags/{dag_ids['a']}/dagRuns/{quote(run['dag_run_id'], safe='')}", admin)
        stack.call("PATCH", f"/api/v2/dags/{dag_ids['a']}", admin, {"is_paused": False})
        promote = {"logical_date": None, "conf": {"mode": "promote", "confirm_migration": names["a"]}}
        run_id = stack.call("POST", f"/api/v2/dags/{dag_ids['a']}/dagRuns", token, promote)["dag_run_id"]
        allowed = stack.wait(lambda: stack.finished(admin, dag_ids["a"], run_id), 600, "user-a's promote run")
        allowed_log = preflight_log(stack, admin, dag_ids["a"], run_id)

    assert own == 404  # authorized; no run has written a page yet
    assert other == 403
    assert listed == {dag_ids["a"]}
    assert trigger_other == 403 and runs_of_b == []
    assert trigger_own == 200
    assert allowed["triggering_user_name"] == "user-a" and "refused before any change: user" not in allowed_log
    assert "nothing was copied yet" in allowed_log, allowed_log[-4000:]
    print(f"\ntenant roles (FAB): user-a sees {sorted(listed)}; B's page 403, B's trigger 403 "
          f"({json.dumps(names)})")
