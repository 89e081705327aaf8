"""The work dir in object storage: a real S3-compatible server (SeaweedFS, testbed/object_store.py), never a mock.

Credentials come only from the Airflow connection; a batch on Spark Connect reads its plan from the bucket and writes
its report there. Catch-up runs and a promotion of a real migration DAG on the S3 work dir, and the API server
rendering them from the bucket, are asserted on the evidence bundle's shared state (test_evidence_bundle.py): one
catch-up and one promotion built for both.
"""

from __future__ import annotations

import pytest
from scenarios import provision, run_batch, seed_plain, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark, pytest.mark.long]


def test_the_work_dir_on_s3_goes_through_the_connection_only(s3_work_dir, object_store, monkeypatch):
    import s3fs

    from kafka_ferry.storage.workdir import WorkDirError, as_path, read_text, work_base, work_dir, write_text

    env, fs, root = s3_work_dir
    page = write_text(work_dir("orders") / "runs" / "r.html", "<p>batch</p>")

    assert fs.cat(f"{root}/work/orders/runs/r.html") == b"<p>batch</p>"
    # the text that goes to XCom names the connection, never its secret, and leads back to the object
    assert str(page) == f"s3://{env['KFERRY_WORK_DIR_CONN_ID']}@{root}/work/orders/runs/r.html"
    assert read_text(as_path(str(page))) == "<p>batch</p>"
    # the server enforces credentials: without the connection's there is no reading the work dir
    anonymous = s3fs.S3FileSystem(anon=True, endpoint_url=object_store.ENDPOINT, skip_instance_cache=True)
    with pytest.raises(PermissionError):
        anonymous.cat(f"{root}/work/orders/runs/r.html")
    # credentials in the URL are refused, and not echoed
    monkeypatch.setenv("KFERRY_WORK_DIR", f"s3://{object_store.ACCESS_KEY}:{object_store.SECRET_KEY}@{root}/w")
    with pytest.raises(WorkDirError, match="never in the URL") as refused:
        work_base()
    assert object_store.SECRET_KEY not in str(refused.value)


def test_a_batch_on_spark_connect_reads_its_plan_from_s3_and_writes_its_report_there(
        clusters, tmp_path, s3_work_dir, spark_connect, monkeypatch):
    s3_env, fs, root = s3_work_dir
    monkeypatch.setenv("KFERRY_LOCAL_DIR", str(tmp_path / "local"))
    p = clusters.unique("s3sc")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, 20)
    spec_path = write_spec(tmp_path, clusters, p, copy={"spark_connection_id": spark_connect})
    provision(spec_path)

    report = run_batch(spec_path, spark_connect)  # this task is the Connect client: it reads and writes the store

    assert report["records_copied"] == 40 and report["lag_after_total"] == 0
    names = {n.rsplit("/", 1)[-1] for n in fs.find(f"{root}/work/{p.lower()}")}
    assert f"report-{report['batch_id']}.json" in names and f"plan-{report['batch_id']}.json" in names, names
    # what Spark is handed stays local: the package zip (and the kept session's record beside it)
    assert list((tmp_path / "local").rglob("*.zip")) and not any(n.endswith(".zip") for n in names)
