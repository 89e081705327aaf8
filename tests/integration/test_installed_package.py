"""A non-editable install runs a copy batch end to end, as the Docker image would.

`pip install .` builds a wheel (in an isolated build environment, as `make install` does) from a copy of
what the image copies (pyproject.toml, README.md, plugins/) into a directory of its own (`--no-deps`:
the package's dependencies are this venv's). A child process then imports kafka_ferry only from that
install (it comes first on PYTHONPATH; the checkout's editable path comes after site-packages) and runs
the DAG's plan -> copy -> report tasks, spark-submit included: the launcher, the package zip and the
Spark job all come from the install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from scenarios import assert_copied_exactly_once, provision, seed_plain, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
PER_PARTITION = 200

TASKS = textwrap.dedent("""
    import json, sys
    import kafka_ferry
    from airflow.sdk.exceptions import AirflowSkipException
    from kafka_ferry.operators.copy import CopyBatchSparkOperator, CopyReportOperator, PlanCopyBatchOperator

    spec_path, spark_conn = sys.argv[1], sys.argv[2]
    class TI:
        xcom = {}
        def xcom_pull(self, task_ids):
            return self.xcom.get(task_ids)
    context = {"ti": TI()}
    TI.xcom["plan_copy"] = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute(context)
    CopyBatchSparkOperator(task_id="copy_batch", spec_path=spec_path, conn_id=spark_conn,
                           env_vars={"PYSPARK_PYTHON": sys.executable}).execute(context)
    report = CopyReportOperator(task_id="copy_report", spec_path=spec_path).execute(context)
    print(json.dumps({"package": kafka_ferry.__file__, "records_copied": report["records_copied"],
                      "report_path": TI.xcom["plan_copy"]["report_path"]}))
""")


def test_a_non_editable_install_runs_a_copy_batch_end_to_end(clusters, tmp_path, work_dir, spark_on_path):
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "plugins", source / "plugins",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "--target", str(site), str(source)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-3000:]
    assert (site / "kafka_ferry" / "copy" / "spark_job.py").is_file()
    assert not (site / "kafka_ferry" / "__editable__").exists()

    p = clusters.unique("inst")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, PER_PARTITION)
    spec_path = write_spec(tmp_path, clusters, p)
    provision(spec_path)
    source_id = clusters.cluster("source").describe_cluster().cluster_id

    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-c", TASKS, spec_path, clusters.SPARK_CONN], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])

    assert Path(result["package"]).is_relative_to(site), result["package"]  # the install, not the checkout
    report = json.loads(Path(result["report_path"]).read_text())
    packages = {row["executor"]["package"] for row in report["partitions"]}
    # the Spark workers imported the zip the installed package built of itself
    assert packages and all(".zip" in path and "kafka_ferry-" in path for path in packages), packages
    assert result["records_copied"] == 2 * PER_PARTITION
    pairs = assert_copied_exactly_once(clusters, topic, topic, 2, source_id)
    assert all(len(partition_pairs) == PER_PARTITION for partition_pairs in pairs.values())
