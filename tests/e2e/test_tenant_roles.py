"""Tenant separation on the real stack with a real auth manager (issue 36 case 9): the FAB provider's, whose roles
carry per-DAG permissions. A user of tenant A may read A's report pages and trigger A's DAG; B's report page
answers 403 and B's DAG cannot be triggered (Airflow's SimpleAuthManager, the stack's auth manager before, has no
per-DAG roles: every user saw every DAG).
"""

from __future__ import annotations

import json
import urllib.error

import pytest
import yaml

from airflow_stack import AirflowStack
from kafka_ferry.core.trigger_form import DRY_RUN
from kafka_ferry.dag_factory import write_stubs

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.e2e]

TENANT_PERMISSIONS = {"DAG Runs": ("can_read", "can_create")}  # with the tenant's own DAG:<id> read and edit


def status(stack: AirflowStack, method: str, path: str, token: str, body: dict | None = None) -> int:
    try:
        stack.call(method, path, token, body)
    except urllib.error.HTTPError as exc:
        return exc.code
    return 200


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
    write_stubs(dags)
    dag_ids = {t: f"kafka_ferry__{n}" for t, n in names.items()}
    with AirflowStack(tmp_path / "airflow", dags, {"KFERRY_WORK_DIR": str(tmp_path / "work")}, auth="fab") as stack:
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

    assert own == 404  # authorized; no run has written a page yet
    assert other == 403
    assert listed == {dag_ids["a"]}
    assert trigger_other == 403 and runs_of_b == []
    assert trigger_own == 200
    print(f"\ntenant roles (FAB): user-a sees {sorted(listed)}; B's page 403, B's trigger 403 "
          f"({json.dumps(names)})")
