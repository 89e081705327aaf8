"""Copy throughput: kafka-ferry's copy job vs a raw confluent-kafka loop vs MirrorMaker 2, on the same data.

    .venv/bin/python bench/copy_throughput.py [--records 2000000] [--partitions 12] [--record-bytes 1024]
                                              [--master local[2]] [--skip-mm2] [--skip-connect]
                                              [--profile] [--one-lane-too]

One run, side by side (these machines are noisy): seed one source topic, then copy it to three destination
topics: (a) kafka-ferry (plan -> the copy task's spark-submit -> report, as the DAG runs it, with the host's
driver class archive in place as on a worker that ran a batch before; a missing one is written first by a
one-record batch, whose seconds are printed as a one-time cost), (a') kafka-ferry
on a running Spark Connect server (plan -> the copy task as a Connect client -> report; the server is started
before the clock starts and runs one small job first, as a platform keeps it running, and its start-up is
printed apart; the copy is timed as the migration's first batch and again as a running migration's next batch,
whose kept session has its Python workers up), (b) the raw
consume->produce loop of bench/raw_loop.py (the limit here), (c) MirrorMaker 2 in dedicated mode.
Before each timed copy the page cache is written out and the machine left idle for 2 s (`_common.settle`),
so no copier pays for the writes of the one before it; at the end every topic of the run is deleted.
Prints records/s and MB/s of each and the ratios (a)/(c), (a)/(b), (a')/(c), (a')/(b) as JSON, the steady rates of
(a') and (c), both watched the same way on the destination (first record seen to last), and their ratio, each one's
end-to-end time beyond copying at its steady rate (``fixed_s``) and the ratio (a')/(c) would reach with no fixed
cost (``ratio_connect_to_mm2_at_no_fixed_cost``), and the fixed costs: a catch-up of one record per partition on
each engine (plan + engine + report), a no-op catch-up (nothing new), on spark-submit the first batch on a new host
(it writes the driver's class archive) and, on Connect, the migration's next one-record batch (its kept session's
Python workers are already running), and spark-submit's floor: a job that does nothing, started exactly as the copy
task starts its job (its seconds bound what any spark-submit batch costs besides copying; `batch_over_floor_s`:
what the one-record batch costs beyond it, kafka-ferry's own steps). `--profile` also copies one partition
in-process under cProfile and prints where the time goes. Needs the test bed up.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from _common import REPO, create_topic, drop_topics, end_offsets, rate, seed, settle, tb
from raw_loop import raw_copy

import mirrormaker

SOURCE_CONN, DESTINATION_CONN, SPARK_CONN = "kf_bench_source", "kf_bench_destination", "kf_bench_spark"
CONNECT_CONN = "kf_bench_spark_connect"


def setup_connections(master: str) -> None:
    for conn, bootstrap in ((SOURCE_CONN, tb.SOURCE.bootstrap), (DESTINATION_CONN, tb.DESTINATION.bootstrap)):
        os.environ[f"AIRFLOW_CONN_{conn.upper()}"] = json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}})
    os.environ[f"AIRFLOW_CONN_{SPARK_CONN.upper()}"] = json.dumps({"conn_type": "spark", "host": master})
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


def write_spec(work: Path, name: str, topic: str, per_partition: int, prefix: str = "ferry.",
               spark_conn: str = SPARK_CONN, lanes: int | None = None) -> Path:
    spec = {"name": name, "tenant": "bench",
            "source": {"connection_id": SOURCE_CONN, "alias": "src"},
            "destination": {"connection_id": DESTINATION_CONN, "alias": f"bench-{name}"},
            "topics": {"include": [topic.replace(".", "\\.")], "rename": {"policy": "prefix", "prefix": prefix}},
            "copy": {"max_records_per_partition": per_partition + 1, "max_bytes_per_partition": 2**62,
                     "spark_connection_id": spark_conn, **({"lanes_per_task": lanes} if lanes else {})}}
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def kafka_ferry_copy(spec_path: Path, spark_conn: str = SPARK_CONN) -> tuple[float, dict]:
    """Plan, then the copy task, exactly as the DAG's plan_copy >> copy_batch; wall clock of both. The Spark
    connection's type picks the engine: spark-submit (``SPARK_CONN``) or a client of the running Connect server."""
    from kafka_ferry.operators.copy import CopyBatchSparkOperator, PlanCopyBatchOperator
    from kafka_ferry.operators.provision import ProvisionMirrorTopicsOperator

    ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=str(spec_path)).execute({})
    started = time.monotonic()
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=str(spec_path)).execute({})
    CopyBatchSparkOperator(task_id="copy_batch", spec_path=str(spec_path), conn_id=spark_conn).execute(
        {"ti": _TaskInstance({"plan_copy": plan})})
    elapsed = time.monotonic() - started
    return elapsed, json.loads(Path(plan["report_path"]).read_text())


def driver_archive(work: Path, name: str, partitions: int) -> dict:
    """The host's driver-JVM class archive (core/batches/driver_jvm.py) before the clock, as on a worker that has run a
    batch before: written by a one-record batch when missing (that batch's seconds are printed, a one-time cost)."""
    from kafka_ferry.copy.jvm_archive import DriverArchive, launch_environment

    archive = DriverArchive(work, launch_environment(work, "local[2]", None)[0])  # as the copy task finds it
    if archive.path.is_file():
        return {"path": str(archive.path), "present": True}
    topic = f"{name}.warm"
    create_topic(tb.SOURCE.bootstrap, topic, partitions)
    seed(topic, partitions, partitions, 100)
    spent = catch_up_run(write_spec(work, f"{name}-warm", topic, 1, prefix="warm."), SPARK_CONN)
    if not archive.path.is_file():
        raise RuntimeError(f"the warm-up batch wrote no driver archive at {archive.path}")
    return {"path": str(archive.path), "present": False, "written_by_a_batch_of_s": round(spent, 2)}


class _TaskInstance:
    """XCom hand-over from plan_copy to copy_batch, as the DAG does it."""

    def __init__(self, xcom: dict) -> None:
        self.xcom = xcom

    def xcom_pull(self, task_ids: str):
        return self.xcom.get(task_ids)


def catch_up_run(spec_path: Path, spark_conn: str) -> float:
    """One catch-up as the DAG chains it: plan_copy >> copy_batch >> copy_report; wall clock of the three.

    The copy task skips itself when the plan is empty (nothing new), as in the DAG."""
    from airflow.exceptions import AirflowSkipException

    from kafka_ferry.operators.copy import CopyBatchSparkOperator, CopyReportOperator, PlanCopyBatchOperator
    from kafka_ferry.operators.provision import ProvisionMirrorTopicsOperator

    ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=str(spec_path)).execute({})
    started = time.monotonic()
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=str(spec_path)).execute({})
    context = {"ti": _TaskInstance({"plan_copy": plan})}
    try:
        CopyBatchSparkOperator(task_id="copy_batch", spec_path=str(spec_path), conn_id=spark_conn).execute(context)
    except AirflowSkipException:
        pass
    CopyReportOperator(task_id="copy_report", spec_path=str(spec_path)).execute(context)
    return time.monotonic() - started


def fixed_costs(work: Path, name: str, partitions: int, connect: bool) -> dict:
    """What a batch costs besides copying: a catch-up of one record per partition on each engine (plan +
    engine start + report), then the same catch-up again with nothing new (the no-op run); on spark-submit also
    the first batch on a new host (it writes the driver's class archive, once per host and JVM)."""
    topic = f"{name}.tiny"
    create_topic(tb.SOURCE.bootstrap, topic, partitions)
    seed(topic, partitions, partitions, 100)
    costs = {}
    engines = [("spark_submit", SPARK_CONN)] + ([("spark_connect", CONNECT_CONN)] if connect else [])
    for engine, conn in engines:
        spec_path = write_spec(work, f"{name}-fx-{engine.replace('_', '')}", topic, 1,
                               prefix=f"fx{engine.replace('_', '')}.", spark_conn=conn)
        costs[f"batch_{engine}_s"] = round(catch_up_run(spec_path, conn), 2)
        costs[f"noop_{engine}_s"] = round(catch_up_run(spec_path, conn), 2)
        if engine == "spark_connect":  # the migration's next batch attaches to its kept session: warm workers
            seed(topic, partitions, partitions, 100)
            costs[f"batch_{engine}_next_s"] = round(catch_up_run(spec_path, conn), 2)
    kept, new_host = os.environ["KFERRY_JVM_ARCHIVE_DIR"], tempfile.mkdtemp(prefix="kferry-new-host-jvm-")
    os.environ["KFERRY_JVM_ARCHIVE_DIR"] = new_host
    try:
        spec_path = write_spec(work, f"{name}-fx-newhost", topic, 1, prefix="fxnewhost.")
        costs["batch_spark_submit_new_host_s"] = round(catch_up_run(spec_path, SPARK_CONN), 2)
    finally:
        os.environ["KFERRY_JVM_ARCHIVE_DIR"] = kept
        shutil.rmtree(new_host, ignore_errors=True)
    return costs


FLOOR_APP = """from pyspark import SparkConf, SparkContext
from kafka_ferry.copy.spark_job import _drop_numpy_converters
_drop_numpy_converters()  # as the copy job does: no pandas import on the first JVM call
sc = SparkContext.getOrCreate(SparkConf().setAppName("kafka-ferry bench: engine floor"))
assert sc.parallelize([0, 1], 2).map(lambda x: x + 1).collect() == [1, 2]
"""


def spark_submit_floor(work: Path, master: str, rounds: int = 3) -> dict:
    """The engine's own floor: spark-submit of a two-task job that does nothing, started exactly as the copy task
    starts its job (same SPARK_HOME mirror, driver JVM options and class archive, same Python), from process start
    to exit. No copy on spark-submit can take less than this plus the copying itself."""
    import subprocess

    from kafka_ferry.copy.jvm_archive import driver_options

    app = work / "engine_floor.py"
    app.write_text(FLOOR_APP)
    times = []
    for _ in range(rounds):
        with driver_options(work, True, master, None, None) as (conf, env):
            command = [str(Path(sys.executable).parent / "spark-submit"), "--master", master,
                       *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")], str(app)]
            started = time.monotonic()
            subprocess.run(command, env={**os.environ, **env, "PYSPARK_PYTHON": sys.executable}, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
            times.append(time.monotonic() - started)
    return {"seconds": [round(t, 2) for t in times], "min_s": round(min(times), 2)}


def start_connect_server(master: str) -> tuple[float, bool]:
    """Start (unless running) the test bed's Spark Connect server; seconds it took and whether we started it."""
    import spark_connect

    cores = int(master[len("local["):-1]) if master.startswith("local[") and master[-2].isdigit() else 2
    started_here = not spark_connect.answers()
    began = time.monotonic()
    spark_connect.up(cores=cores)
    os.environ[f"AIRFLOW_CONN_{CONNECT_CONN.upper()}"] = json.dumps(
        {"conn_type": "spark_connect", "host": spark_connect.HOST, "port": spark_connect.PORT})
    took = time.monotonic() - began
    if started_here:
        _warm_server(spark_connect.URL)
    return took, started_here


def _warm_server(url: str) -> None:
    """One small Arrow job in a throwaway session: a server a platform keeps running has run jobs before, so the
    JVM's first-job costs (class loading, code generation, ~2 s here) are not a batch's."""
    from pyspark.sql import SparkSession

    from kafka_ferry.copy.connect_engine import connect_mode_restored

    with connect_mode_restored():
        spark = SparkSession.builder.remote(url).create()
        try:
            spark.range(0, 2, 1, 2).mapInArrow(lambda batches: batches, "id long").collect()
        finally:
            spark.stop()


def connect_next_batch(work: Path, name: str, topic: str, records: int, partitions: int) -> dict:
    """The same copy as a running migration's next batch: a first batch of one record per partition opens the
    migration's kept session (its Python workers start), then the rest is copied and timed like the first run."""
    first = write_spec(work, name, topic, 0, prefix="ferrysc2.", spark_conn=CONNECT_CONN)  # 1 record/partition
    kafka_ferry_copy(first, CONNECT_CONN)
    rest = records - partitions
    spec_path = write_spec(work, name, topic, records // partitions + 1, prefix="ferrysc2.", spark_conn=CONNECT_CONN)
    settle()
    with DestinationWatch(f"ferrysc2.{topic}", partitions, records, already=partitions) as watch:
        elapsed, report = kafka_ferry_copy(spec_path, CONNECT_CONN)
        watch.wait(60)
    if report["records_copied"] != rest:
        raise RuntimeError(f"kafka-ferry's next batch on Spark Connect copied {report['records_copied']} of {rest}")
    steady_s, steady_records = watch.steady()
    return {"records": rest, "seconds": round(elapsed, 2), "records_per_s": round(rest / elapsed),
            "job_s": report["duration_s"], "steady_records_per_s": round(steady_records / steady_s)}


class DestinationWatch:
    """Polls a destination topic's end offsets every 0.2 s: when the first records showed up and when all did.

    The one definition of a steady rate for every copier: records written after the first poll that saw any,
    over the time from that poll to the poll that saw them all (start-up, before the first record, is out).
    """

    def __init__(self, topic: str, partitions: int, records: int, already: int = 0) -> None:
        import threading

        self.topic, self.partitions, self.records, self.already = topic, partitions, records, already
        self.first_seen: tuple[float, int] | None = None
        self.done_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> DestinationWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def _poll(self) -> None:
        while not self._stop.is_set():
            copied = _copied_so_far(self.topic, self.partitions)
            now = time.monotonic()
            if copied > self.already and self.first_seen is None:
                self.first_seen = (now, copied)
            if copied >= self.records:
                self.done_at = now
                return
            time.sleep(0.2)

    def wait(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)
        if self.done_at is None:
            raise TimeoutError(f"{self.topic}: not all {self.records} records seen in {timeout_s:.0f} s")

    def steady(self) -> tuple[float, int]:
        """(seconds, records) from the first poll that saw records to the one that saw them all."""
        if self.first_seen is None or self.done_at is None:
            raise RuntimeError(f"{self.topic}: the copy was not watched to its end")
        return self.done_at - self.first_seen[0], self.records - self.first_seen[1]


def mm2_copy(work: Path, topic: str, partitions: int, records: int) -> dict:
    """MM2 dedicated mode from process start to the last record on the destination; also its steady rate."""
    started = time.monotonic()
    with mirrormaker.running_mirrormaker(work / "mm2", topics=topic.replace(".", "\\."), groups="none",
                                         tasks=2), DestinationWatch(f"mmsrc.{topic}", partitions, records) as watch:
        watch.wait(1800)
    steady_s, steady_records = watch.steady()
    return {"total_s": watch.done_at - started, "steady_s": steady_s, "steady_records": steady_records}


def _copied_so_far(topic: str, partitions: int) -> int:
    """Records MM2 has written so far; 0 while the topic it creates has no leaders yet (a retriable error)."""
    from _common import topic_exists
    from confluent_kafka import KafkaError, KafkaException

    not_yet = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART}
    if not topic_exists(tb.DESTINATION.bootstrap, topic):
        return 0
    try:
        return end_offsets(tb.DESTINATION.bootstrap, topic, partitions)
    except KafkaException as exc:
        if exc.args[0].code() not in not_yet and not exc.args[0].retriable():
            raise
        return 0


def profile_one_partition(spec_path: Path, topic: str) -> str:
    """Copy one more partition's worth in-process under cProfile: where does a copier spend its time?"""
    from kafka_ferry.copy.planning import plan_copy
    from kafka_ferry.copy.runner import copy_group
    from kafka_ferry.core.specs.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.state.store import MigrationStateStore

    spec = load_spec(spec_path)
    spec = spec.model_copy(update={"name": spec.name + "-profile", "state_topic": f"kafka-ferry.{spec.name}-prof",
                                   "topics": spec.topics.model_copy(update={"rename": type(spec.topics.rename)(
                                       policy="prefix", prefix="ferryprof.")})})
    source, destination = kafka_cluster(SOURCE_CONN), kafka_cluster(DESTINATION_CONN)
    from kafka_ferry.provision.provision import apply_topic_plan, compute_topic_plan, ensure_internal_topics

    ensure_internal_topics(spec, destination)
    apply_topic_plan(compute_topic_plan(spec, source, destination), destination)
    plan = plan_copy(spec, source, destination, MigrationStateStore(destination, spec.state_topic_name))
    task = plan.task_for(topic, 0)
    configs = {"source": source.client_config, "destination": destination.client_config}
    profiler = cProfile.Profile()
    started = time.monotonic()
    profiler.enable()
    rows = copy_group(plan, [task], configs)
    profiler.disable()
    elapsed = time.monotonic() - started
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
    return (f"one partition in-process: {rows[0]['records_copied']} records in {elapsed:.1f} s "
            f"({rows[0]['records_copied'] / elapsed:.0f} records/s)\n{out.getvalue()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-mm2", action="store_true")
    parser.add_argument("--skip-connect", action="store_true", help="skip the Spark Connect engine")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--one-lane-too", action="store_true",
                        help="also copy with copy.lanes_per_task=1 on spark-submit (before lanes), side by side")
    args = parser.parse_args()
    name = f"tput-{uuid.uuid4().hex[:6]}"
    topic = f"{name}.data"
    work = Path(tempfile.mkdtemp(prefix="kferry-bench-"))
    os.environ["KFERRY_WORK_DIR"] = str(work)
    os.environ.setdefault("KFERRY_JVM_ARCHIVE_DIR", str(REPO / ".testbed" / "jvm"))  # the host's, kept between runs
    setup_connections(args.master)

    try:
        return measure(args, name, topic, work)
    finally:  # a run writes gigabytes: every topic named after it goes, on both clusters, and its work dir
        drop_topics(name)
        shutil.rmtree(work, ignore_errors=True)


def measure(args, name: str, topic: str, work: Path) -> int:
    records, partitions, size = args.records, args.partitions, args.record_bytes
    create_topic(tb.SOURCE.bootstrap, topic, partitions)
    results: dict = {"topic": topic, "records": records, "partitions": partitions, "record_bytes": size,
                     "seed": rate(records, size, seed(topic, partitions, records, size))}

    spec_path = write_spec(work, name, topic, records // partitions + 1)
    results["driver_archive"] = driver_archive(work, name, partitions)
    settle()
    ferry_s, report = kafka_ferry_copy(spec_path)
    if report["records_copied"] != records:
        raise RuntimeError(f"kafka-ferry copied {report['records_copied']} of {records}")
    results["kafka_ferry"] = {**rate(records, size, ferry_s), "job_s": report["duration_s"],
                              "slowest_partition_s": max(p["duration_s"] for p in report["partitions"]),
                              "syncs_written": report["syncs_written"]}

    if args.one_lane_too:
        settle()
        one_lane_s, one_lane = kafka_ferry_copy(write_spec(work, f"{name}-1l", topic, records // partitions + 1,
                                                           prefix="ferry1l.", lanes=1))
        if one_lane["records_copied"] != records:
            raise RuntimeError(f"kafka-ferry with one lane copied {one_lane['records_copied']} of {records}")
        results["kafka_ferry_one_lane"] = {**rate(records, size, one_lane_s), "job_s": one_lane["duration_s"]}
        results["ratio_lanes_to_one_lane"] = round(results["kafka_ferry"]["records_per_s"]
                                                   / results["kafka_ferry_one_lane"]["records_per_s"], 2)

    if not args.skip_connect:
        server_s, started_here = start_connect_server(args.master)
        try:
            connect_spec = write_spec(work, f"{name}-sc", topic, records // partitions + 1, prefix="ferrysc.",
                                      spark_conn=CONNECT_CONN)
            settle()
            with DestinationWatch(f"ferrysc.{topic}", partitions, records) as watch:
                connect_s, connect_report = kafka_ferry_copy(connect_spec, CONNECT_CONN)
                watch.wait(60)
            connect_steady_s, connect_steady_records = watch.steady()
            results["kafka_ferry_connect_next_batch"] = connect_next_batch(work, f"{name}-sc2", topic, records,
                                                                           partitions)
            results["fixed_costs"] = fixed_costs(work, name, partitions, connect=True)
        finally:
            if started_here:
                import spark_connect

                spark_connect.down()
        if connect_report["records_copied"] != records:
            raise RuntimeError(f"kafka-ferry on Spark Connect copied {connect_report['records_copied']} of {records}")
        results["kafka_ferry_connect"] = {**rate(records, size, connect_s), "job_s": connect_report["duration_s"],
                                          "server_start_s": round(server_s, 1),
                                          "steady": rate(connect_steady_records, size, connect_steady_s)}

    else:
        results["fixed_costs"] = fixed_costs(work, name, partitions, connect=False)

    create_topic(tb.DESTINATION.bootstrap, f"raw.{topic}", partitions)
    settle()
    results["raw_loop"] = rate(records, size, raw_copy(topic, f"raw.{topic}", partitions, records))
    settle()
    floor = results["spark_submit_floor"] = spark_submit_floor(work, args.master)
    # What a one-record batch costs beyond the engine's own floor: kafka-ferry's steps (plan, claim, report).
    floor["batch_over_floor_s"] = round(results["fixed_costs"]["batch_spark_submit_s"] - floor["min_s"], 2)

    if not args.skip_mm2:
        settle()
        mm2 = mm2_copy(work, topic, partitions, records)
        results["mirrormaker2"] = {**rate(records, size, mm2["total_s"]),
                                   "steady": rate(mm2["steady_records"], size, mm2["steady_s"])}
        results["ratio_ferry_to_mm2"] = round(results["kafka_ferry"]["records_per_s"]
                                              / results["mirrormaker2"]["records_per_s"], 2)
    if "kafka_ferry_connect" in results:
        connect = results["kafka_ferry_connect"]
        # Steady, for both the same way (DestinationWatch): from the first record on the destination to the last.
        # Also the job's own rate (records over the copy job: session, tasks and all partitions).
        connect["job_records_per_s"] = round(records / connect["job_s"])
        for peer, key in (("mirrormaker2", "ratio_connect_to_mm2"), ("raw_loop", "ratio_connect_to_raw")):
            if peer in results:
                results[key] = round(connect["records_per_s"] / results[peer]["records_per_s"], 2)
        if "mirrormaker2" in results:
            mm2_rate = results["mirrormaker2"]["records_per_s"]
            results["ratio_connect_next_batch_to_mm2"] = round(
                results["kafka_ferry_connect_next_batch"]["records_per_s"] / mm2_rate, 2)
            results["ratio_connect_steady_to_mm2_steady"] = round(
                connect["steady"]["records_per_s"] / results["mirrormaker2"]["steady"]["records_per_s"], 2)
            # Each end-to-end time split into copying at its own steady rate and the rest (start-up, the time to the
            # first record and after the last: a Connect session and its Python workers, MM2's JVM and tasks), and
            # the ratio the first batch would reach with no fixed cost at all: MM2 end to end over the Connect copy
            # at its steady rate. A ratio above it needs a faster copy, not a faster start.
            for copier in (connect, results["mirrormaker2"]):
                copier["fixed_s"] = round(copier["seconds"] - records / copier["steady"]["records_per_s"], 2)
            results["ratio_connect_to_mm2_at_no_fixed_cost"] = round(
                results["mirrormaker2"]["seconds"] / (records / connect["steady"]["records_per_s"]), 2)
    results["ratio_ferry_to_raw"] = round(results["kafka_ferry"]["records_per_s"]
                                          / results["raw_loop"]["records_per_s"], 2)
    print(json.dumps(results, indent=1))
    if args.profile:
        print(profile_one_partition(spec_path, topic))
    return 0


if __name__ == "__main__":
    sys.exit(main())
