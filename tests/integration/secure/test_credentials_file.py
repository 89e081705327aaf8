"""The credentials-file path (what YARN uses) run for real on a Spark standalone cluster, over SASL_SSL as
least-privilege principals: the job copies exactly, the file is gone afterwards, the password never shows."""

from __future__ import annotations

import glob
import tempfile
from pathlib import Path

import pytest
from scenarios import assert_copied_exactly_once, provision, run_batch
from test_least_privilege import PARTITIONS, ProcessListWatch, secure_migration

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_copy_on_standalone_with_a_credentials_file(private, tmp_path, work_dir, spark_standalone, monkeypatch):
    m = secure_migration(private, tmp_path, "credfile", spark_connection_id=spark_standalone,
                         credentials_file=True)
    secrets = [m["users"]["source"][1], m["users"]["destination"][1]]
    # this run's temporary files only: a copy task of another test run (CI's fault lane kills some) writes to /tmp
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    before = set(glob.glob(str(Path(tempfile.gettempdir()) / "kferry-credentials-*")))
    provision(m["spec_path"])

    with ProcessListWatch(secrets) as watch:
        report = run_batch(m["spec_path"], spark_standalone)

    assert report["records_copied"] == 2 * PARTITIONS * 40
    source_id = private.cluster("source").describe_cluster().cluster_id
    for t in m["topics"]:
        assert_copied_exactly_once(private, t, t, PARTITIONS, source_id)
    assert watch.samples > 5 and watch.hits == []
    assert set(glob.glob(str(Path(tempfile.gettempdir()) / "kferry-credentials-*"))) == before  # removed
