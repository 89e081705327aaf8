"""A Spark Structured Streaming query handed over by the promotion, on the test bed with Spark ``local[2]``.

The query reads two source topics (renamed on the destination: the spec's prefix) into a file sink with a
checkpoint, stops while producers keep writing, the migration is promoted through the DAG (``dag.test`` with
``mode=promote``), whose ``hand_over_spark_checkpoints`` task rewrites the checkpoint; the same query started again
against the destination with the same checkpoint and sink then holds every record exactly once: each source record
by its key and source offset (provenance headers on the destination), each record written to the destination after
the cutover by its key. Then through ``kafka-ferry checkpoint``: a second rewrite changes nothing, and a checkpoint
of a running query and one whose position was lost to retention are refused, their directories byte for byte
unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from confluent_kafka import TopicPartition
from dag_test_speed import QUICK_POLL
from scenarios import provision, write_spec

import spark_kafka_jars

# long: three Spark applications and a promotion (minutes); CI runs it in its second lane (`make test-long`)
pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark, pytest.mark.long]

# One Spark application: each query (bootstrap, topics, checkpoint, sink) runs with trigger availableNow in small
# batches, then the sink is read back through its metadata log (as any reader of a file sink reads it).
QUERY = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    jars, queries, read_back = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    spark = (SparkSession.builder.master("local[2]").config("spark.jars", jars).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    for q in queries:
        frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", q["bootstrap"])
                 .option("subscribe", q["topics"]).option("startingOffsets", "earliest")
                 .option("includeHeaders", "true").option("maxOffsetsPerTrigger", "150").load())
        out = frame.selectExpr(
            "CAST(key AS STRING) AS key", "topic", "partition", "offset",
            "try_element_at(transform(filter(headers, h -> h.key = 'kferry.src.offset'), "
            "h -> CAST(h.value AS STRING)), -1) AS src_offset")
        query = (out.writeStream.format("json").option("path", q["sink"])
                 .option("checkpointLocation", q["checkpoint"]).trigger(availableNow=True).start())
        query.awaitTermination()
    rows = [r.asDict() for r in spark.read.json(read_back).collect()] if read_back != "-" else []
    print("ROWS " + json.dumps(rows))
    spark.stop()
""")

PROMOTE = QUICK_POLL + textwrap.dedent("""
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[1])
    assert not bag.import_errors, bag.import_errors
    run = bag.get_dag("kf_promo_test").test(run_conf={"mode": "promote", "confirm_migration": sys.argv[2]})
    print("RESULT " + json.dumps({"state": str(run.state)}))
""")


class Writer:
    """Writes records with unique keys (``<tag>|<partition>|<n>``) and remembers each key's offset."""

    def __init__(self, producer, tag: str, topic: str, partitions: int) -> None:
        self.producer, self.tag, self.topic, self.partitions = producer, tag, topic, partitions
        self.offsets: dict[str, tuple[str, int, int]] = {}
        self.errors: list = []
        self.n = 0

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.offsets[msg.key().decode()] = (msg.topic(), msg.partition(), msg.offset())

    def write(self, count: int) -> None:
        for _ in range(count):
            partition = self.n % self.partitions
            self.producer.produce(self.topic, key=f"{self.tag}|{partition}|{self.n}".encode(), value=b"v",
                                  partition=partition, on_delivery=self._delivered)
            self.n += 1
        assert self.producer.flush(30) == 0 and not self.errors, self.errors[:3]


def spark(queries: list[dict], read_back: str = "-") -> list[dict]:
    jars = ",".join(str(j) for j in spark_kafka_jars.jars())
    done = subprocess.run([sys.executable, "-c", QUERY, jars, json.dumps(queries), read_back], capture_output=True,
                          text=True, timeout=600)
    rows = [line for line in done.stdout.splitlines() if line.startswith("ROWS ")]
    assert done.returncode == 0 and rows, (done.stdout + done.stderr)[-6000:]
    return json.loads(rows[0][5:])


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def latest_offsets(checkpoint: Path) -> dict:
    batch = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    return json.loads((checkpoint / "offsets" / str(batch)).read_text().split("\n")[2])


def kafka_ferry(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafka_ferry.cli", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.timeout(2400)  # three Spark applications and a promotion, on a small shared machine
def test_a_stopped_query_resumes_on_the_destination_exactly_once(clusters, tmp_path):
    p = clusters.unique("ckh")
    a, b, c = (clusters.create_topic("source", f"{p}.{name}", n) for name, n in (("a", 2), ("b", 1), ("c", 1)))
    prefix = "mig."
    checkpoint, sink = tmp_path / "query" / "checkpoint", tmp_path / "query" / "out"
    lost_checkpoint, lost_sink = tmp_path / "lost" / "checkpoint", tmp_path / "lost" / "out"
    spec_path = Path(write_spec(tmp_path, clusters, p, topics={"include": [f"{p}\\..*"],
                                                               "rename": {"policy": "prefix", "prefix": prefix}},
                                consumers={"spark_checkpoints": [{"checkpoint": str(checkpoint),
                                                                  "file_sink": str(sink)}]},
                                promotion={"quiesce_window_seconds": 2, "poke_interval_seconds": 1,
                                           "sensor_timeout_seconds": 240}))
    producer = clusters.producer("source")
    writers = {t: Writer(producer, t, t, n) for t, n in ((a, 2), (b, 1), (c, 1))}
    for t in (a, b):
        writers[t].write(150)
    writers[c].write(5)

    # the query runs while producers keep writing; it stops (availableNow: at the end it saw) before they do
    stop = threading.Event()

    def keep_writing() -> None:
        while not stop.is_set():
            for t in (a, b):
                writers[t].write(4)
            time.sleep(0.5)

    background = threading.Thread(target=keep_writing)
    background.start()
    try:
        spark([{"bootstrap": clusters.source_bootstrap, "topics": f"{a},{b}", "checkpoint": str(checkpoint),
                "sink": str(sink)},
               {"bootstrap": clusters.source_bootstrap, "topics": c, "checkpoint": str(lost_checkpoint),
                "sink": str(lost_sink)}])
        for t in (a, b):
            writers[t].write(30)  # after the query stopped
    finally:
        stop.set()
        background.join()
    source = clusters.cluster("source")
    ends = source.list_offsets([(a, 0), (a, 1), (b, 0)], "latest")
    stopped_at = latest_offsets(checkpoint)
    assert all(stopped_at[t][str(q)] < ends[(t, q)] for t, q in ends), (stopped_at, ends)  # mid-stream
    assert latest_offsets(lost_checkpoint) == {c: {"0": 5}}
    # records the query already read leave the source by retention before the copy starts, so the destination's
    # offsets are not the source's: a-0 and b-0 are shifted, a-1 is not
    deleted = {(a, 0): stopped_at[a]["0"] - 7, (b, 0): stopped_at[b]["0"] // 2}
    for future in clusters.admin("source").delete_records([TopicPartition(t, q, o) for (t, q), o in
                                                           deleted.items()]).values():
        future.result(30)
    # the lost query's next records go to retention before the copy starts: its position cannot be translated
    writers[c].write(10)
    for future in clusters.admin("source").delete_records([TopicPartition(c, 0, 8)]).values():
        future.result(30)

    running = tmp_path / "running" / "checkpoint"
    shutil.copytree(checkpoint, running)
    last = max(int(f.name) for f in (running / "commits").iterdir() if f.name.isdigit())
    (running / "commits" / str(last)).unlink()  # a batch without commit: what a running query's checkpoint shows
    (running / "commits" / f".{last}.crc").unlink(missing_ok=True)

    # promote through the DAG; its hand_over_spark_checkpoints task rewrites the listed checkpoint
    provision(str(spec_path))
    home, dags = tmp_path / "airflow", tmp_path / "airflow" / "dags"
    dags.mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "airflow_dags" / "kf_promotion_test_dag.py", dags)
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "KF_SPEC": str(spec_path),
           "KFERRY_WORK_DIR": str(tmp_path / "work")}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], env=env, check=True,
                   capture_output=True, timeout=300)
    name = p.lower()
    with (tmp_path / "promote.log").open("w") as out:  # a file: readable while it runs
        subprocess.run([sys.executable, "-c", PROMOTE, str(dags), name], env=env, stdout=out,
                       stderr=subprocess.STDOUT, timeout=900)
    log = (tmp_path / "promote.log").read_text()
    result = [line for line in log.splitlines() if line.startswith("RESULT ")]
    assert result and json.loads(result[0][7:])["state"] == "success", log[-6000:]
    record = json.loads((checkpoint / f"kafka-ferry-handover-{name}.json").read_text())
    assert record["status"] == "done" and record["resume_with"]["subscribe"] == f"{prefix}{a},{prefix}{b}"
    assert record["resume_with"]["kafka.bootstrap.servers"] == clusters.destination_bootstrap
    assert latest_offsets(checkpoint) == {
        f"{prefix}{a}": {"0": stopped_at[a]["0"] - deleted[(a, 0)], "1": stopped_at[a]["1"]},
        f"{prefix}{b}": {"0": stopped_at[b]["0"] - deleted[(b, 0)]}}

    # after the cutover producers write to the destination; the query resumes there, same checkpoint and sink
    dest_producer = clusters.producer("destination")
    after = {t: Writer(dest_producer, f"after-{t}", f"{prefix}{t}", n) for t, n in ((a, 2), (b, 1))}
    for w in after.values():
        w.write(25)
    rows = spark([{"bootstrap": clusters.destination_bootstrap, "topics": f"{prefix}{a},{prefix}{b}",
                   "checkpoint": str(checkpoint), "sink": str(sink)}], read_back=str(sink))

    keys = Counter(r["key"] for r in rows)
    assert [k for k, n in keys.items() if n > 1] == []  # nothing re-read
    expected = {k for t in (a, b) for k in writers[t].offsets} | {k for w in after.values() for k in w.offsets}
    assert set(keys) == expected  # nothing skipped
    for r in rows:  # each row is the record its key names: source coordinates, directly or by provenance
        if r["key"].startswith("after-"):
            assert r["src_offset"] is None
            continue
        topic, partition, offset = writers[r["key"].split("|")[0]].offsets[r["key"]]
        if r["topic"] == topic:
            assert (r["partition"], r["offset"], r["src_offset"]) == (partition, offset, None)
        else:
            assert (r["topic"], r["partition"], int(r["src_offset"])) == (f"{prefix}{topic}", partition, offset)
    assert {r["topic"] for r in rows} == {a, b, f"{prefix}{a}", f"{prefix}{b}"}

    # the command: a second rewrite changes nothing; a running query's and a lost position's checkpoints are refused
    cli_spec = tmp_path / "cli" / "dags" / "migrations" / f"{name}.yaml"
    cli_spec.parent.mkdir(parents=True)
    shutil.copy(spec_path, cli_spec)
    again_before = snapshot(checkpoint)
    again = kafka_ferry(env, "checkpoint", "rewrite", cli_spec, checkpoint, "--file-sink", sink)
    assert again.returncode == 0 and "already-done" in again.stdout, again.stdout + again.stderr
    assert snapshot(checkpoint) == again_before
    for refused_dir, says in ((running, "has offsets but no commit: the query is running"),
                              (lost_checkpoint, f"{c}-0@5 refused [before-first-copied-record]")):
        before = snapshot(refused_dir)
        for action in ("plan", "rewrite"):
            refused = kafka_ferry(env, "checkpoint", action, cli_spec, refused_dir)
            assert refused.returncode == 1 and says in refused.stdout, refused.stdout + refused.stderr
            assert "nothing was changed" in refused.stdout
        assert snapshot(refused_dir) == before
    assert yaml.safe_load(cli_spec.read_text())["consumers"]["spark_checkpoints"][0]["checkpoint"] == str(checkpoint)
