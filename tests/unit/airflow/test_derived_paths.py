"""A batch's files are derived from the spec and the run, never taken from XCom (issue 36, case 3).

Reproduction: the copy task took ``plan_path`` and ``report_path`` from the planning task's XCom and deleted and
wrote files at them, and a ``scheme://<conn>@bucket`` path picked the object-store connection: whoever could edit
one tenant's XCom could delete a file on a worker, or make a task open another tenant's connection.
"""

from __future__ import annotations

import pytest
from test_copy_credentials import BATCH_ID, submitted  # noqa: F401 - the fixture runs the real copy task

from kafka_ferry.storage.workdir import WorkDirError, as_path


def test_the_files_are_derived_from_the_migration_and_the_batch_id(tmp_path, monkeypatch):
    from kafka_ferry.copy.plan import batch_files, planned_files

    monkeypatch.setenv("KFERRY_WORK_DIR", str(tmp_path / "work"))
    plan, report = batch_files("orders", BATCH_ID)
    assert (plan, report) == (tmp_path / "work" / "orders" / f"plan-{BATCH_ID}.json",
                              tmp_path / "work" / "orders" / f"report-{BATCH_ID}.json")
    summary = {"batch_id": BATCH_ID, "plan_path": str(plan), "report_path": str(report)}
    assert planned_files("orders", summary) == (plan, report)
    assert planned_files("orders", {"batch_id": BATCH_ID}) == (plan, report)


@pytest.mark.parametrize("summary, named", [
    ({"batch_id": BATCH_ID, "report_path": "/etc/kafka-ferry/victim.json"}, "report_path"),
    ({"batch_id": BATCH_ID, "plan_path": "/tmp/other-tenant/plan.json"}, "plan_path"),
    ({"batch_id": "../../other/batch"}, "batch id"),
    ({"batch_id": None}, "batch id"),
])
def test_a_path_or_batch_id_that_is_not_the_derived_one_is_refused(tmp_path, monkeypatch, summary, named):
    from kafka_ferry.copy.plan import BatchFileRefused, planned_files

    monkeypatch.setenv("KFERRY_WORK_DIR", str(tmp_path / "work"))
    with pytest.raises(BatchFileRefused, match=named):
        planned_files("orders", summary)


def test_the_copy_task_deletes_nothing_at_a_path_from_xcom(submitted, tmp_path):  # noqa: F811
    from airflow.sdk.exceptions import AirflowFailException

    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    refused = None
    try:
        submitted("local[2]", summary={"empty": False, "batch_id": BATCH_ID, "report_path": str(victim),
                                       "plan_path": str(tmp_path / "work" / "m" / f"plan-{BATCH_ID}.json")})
    except AirflowFailException as exc:
        refused = exc
    assert victim.exists() and victim.read_text() == "{}"  # before: deleted as the "stale report"
    assert refused is not None and "report_path" in str(refused)

    from kafka_ferry.copy.plan import BatchFileRefused

    assert isinstance(refused.__cause__, BatchFileRefused)  # permanent: no retry


def test_a_stored_path_never_picks_the_connection(monkeypatch):
    monkeypatch.delenv("KFERRY_WORK_DIR_CONN_ID", raising=False)
    with pytest.raises(WorkDirError, match="never taken from a path"):
        as_path("s3://other_tenant_store@bucket/work/orders/report.json")
