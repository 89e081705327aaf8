"""spark-submit's driver JVM on the Airflow worker: the first batch writes the class-data archive, the next one
loads Spark's classes from it, and both copy exactly once (the archive changes how the JVM starts, nothing else).

The JVM's own class-load log (a file, the deployment's option kept after ours) says where each class came from.
"""

from __future__ import annotations

import pytest
from scenarios import assert_copied_exactly_once, provision, run_batch, seed_plain, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.spark]

FROM_ARCHIVE = "source: shared objects file (top)"  # JDK 17+: a class mapped from the dynamic (application) archive


def test_the_first_batch_writes_the_driver_archive_and_the_next_starts_from_it(
        clusters, tmp_path, work_dir, monkeypatch):
    archive_dir = tmp_path / "jvm"
    monkeypatch.setenv("KFERRY_JVM_ARCHIVE_DIR", str(archive_dir))
    p = clusters.unique("jvm")
    topic = clusters.create_topic("source", f"{p}.data", partitions=2)
    seed_plain(clusters, topic, 2, 40)
    spec_path = write_spec(tmp_path, clusters, p)
    provision(spec_path)
    source_id = clusters.cluster("source").describe_cluster().cluster_id

    def batch(n: int) -> tuple[dict, str]:
        log = tmp_path / f"class-load-{n}.log"
        report = run_batch(spec_path, clusters.SPARK_CONN,
                           conf={"spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={log}"})
        return report, log.read_text()

    first, first_log = batch(1)
    archives = sorted(archive_dir.iterdir(), key=lambda p: p.suffix)
    assert first["records_copied"] == 80 and [a.suffix for a in archives] == ["", ".jsa"], archives
    assert FROM_ARCHIVE not in first_log  # it wrote the archive; it could not read it yet
    # the Python workers imported pyspark from the bytecode of the install's compiled mirror (copy/spark_home.py)
    mirror = archives[0]
    assert mirror.name.startswith("spark-home-") and (mirror / "jars").is_symlink()
    assert {row["executor"]["pyspark"] for row in first["partitions"]} == {
        f"{mirror}/python/lib/pyspark.zip/pyspark/__init__.pyc"}

    seed_plain(clusters, topic, 2, 40, start=40)
    second, second_log = batch(2)
    assert second["records_copied"] == 80 and sorted(archive_dir.iterdir(), key=lambda p: p.suffix) == archives
    loaded = second_log.count(FROM_ARCHIVE)
    assert loaded > 1000, f"{loaded} classes from the archive"  # Spark's driver: thousands (6,600 measured)
    pairs = assert_copied_exactly_once(clusters, topic, topic, 2, source_id)
    assert all(len(partition_pairs) == 80 for partition_pairs in pairs.values())
