"""Copy throughput: kafka-ferry's copy job vs a raw confluent-kafka loop vs MirrorMaker 2, on the same data.

    .venv/bin/python bench/copy_throughput.py [--records 2000000] [--partitions 12] [--record-bytes 1024]
                                              [--master local[2]] [--skip-mm2] [--profile]

One run, side by side (these machines are noisy): seed one source topic, then copy it to three destination
topics: (a) kafka-ferry (plan -> spark-submit copy_batch.py -> report, as the DAG runs it), (b) the raw
consume->produce loop of bench/raw_loop.py (the limit here), (c) MirrorMaker 2 in dedicated mode.
Prints records/s and MB/s of each and the ratios (a)/(c), (a)/(b) as JSON. `--profile` also copies one
partition in-process under cProfile and prints where the time goes. Needs the test bed up.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from _common import REPO, admin, end_offsets, rate, seed, tb
from raw_loop import raw_copy

import mirrormaker

SOURCE_CONN, DESTINATION_CONN, SPARK_CONN = "kf_bench_source", "kf_bench_destination", "kf_bench_spark"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create with an AdminClient kept alive until the result is in (a collected client cancels it)."""
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(60)


def setup_connections(master: str) -> None:
    for conn, bootstrap in ((SOURCE_CONN, tb.SOURCE.bootstrap), (DESTINATION_CONN, tb.DESTINATION.bootstrap)):
        os.environ[f"AIRFLOW_CONN_{conn.upper()}"] = json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}})
    os.environ[f"AIRFLOW_CONN_{SPARK_CONN.upper()}"] = json.dumps({"conn_type": "spark", "host": master})
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


def write_spec(work: Path, name: str, topic: str, per_partition: int) -> Path:
    spec = {"name": name, "tenant": "bench",
            "source": {"connection_id": SOURCE_CONN, "alias": "src"},
            "destination": {"connection_id": DESTINATION_CONN, "alias": f"bench-{name}"},
            "topics": {"include": [topic.replace(".", "\\.")], "rename": {"policy": "prefix", "prefix": "ferry."}},
            "copy": {"max_records_per_partition": per_partition + 1, "max_bytes_per_partition": 2**62,
                     "spark_connection_id": SPARK_CONN}}
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def kafka_ferry_copy(spec_path: Path, master: str) -> tuple[float, dict]:
    """Plan, then spark-submit the copy job exactly as the DAG's copy_batch task does; wall clock of both."""
    from kafka_ferry.copy.clients import encode_cluster_configs
    from kafka_ferry.copy.packaging import build_package_zip
    from kafka_ferry.hooks.kafka_cluster import KafkaClusterHook
    from kafka_ferry.operators.copy import PlanCopyBatchOperator
    from kafka_ferry.operators.provision import ProvisionMirrorTopicsOperator

    ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=str(spec_path)).execute({})
    started = time.monotonic()
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=str(spec_path)).execute({})
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "KFERRY_CLUSTER_CONFIGS": encode_cluster_configs(
        KafkaClusterHook(SOURCE_CONN).client_config, KafkaClusterHook(DESTINATION_CONN).client_config)}
    package = build_package_zip(Path(plan["plan_path"]).parent / "packages")
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", master, "--driver-memory", "1g",
           "--py-files", str(package), str(REPO / "spark_jobs" / "copy_batch.py"), "--plan", plan["plan_path"]]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    (spec_path.parent / "spark-submit.log").write_text(done.stdout + done.stderr)  # where the seconds went
    if done.returncode:
        raise RuntimeError(f"copy job failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return elapsed, json.loads(Path(plan["report_path"]).read_text())


def mm2_copy(work: Path, topic: str, partitions: int, records: int) -> dict:
    """MM2 dedicated mode from process start to the last record on the destination; also its steady rate."""
    target = f"mmsrc.{topic}"
    started = time.monotonic()
    first_seen = None
    with mirrormaker.running_mirrormaker(work / "mm2", topics=topic.replace(".", "\\."), groups="none",
                                         tasks=2):
        while True:
            copied = end_offsets(tb.DESTINATION.bootstrap, target, partitions) if _exists(target) else 0
            now = time.monotonic()
            if copied and first_seen is None:
                first_seen = (now, copied)
            if copied >= records:
                break
            if now - started > 1800:
                raise TimeoutError(f"MM2 copied {copied} of {records} in 30 min")
            time.sleep(0.2)
    total = now - started
    steady = (now - first_seen[0], records - first_seen[1]) if first_seen else (total, records)
    return {"total_s": total, "steady_s": steady[0], "steady_records": steady[1]}


def _exists(topic: str) -> bool:
    from _common import topic_exists

    return topic_exists(tb.DESTINATION.bootstrap, topic)


def profile_one_partition(spec_path: Path, topic: str) -> str:
    """Copy one more partition's worth in-process under cProfile: where does a copier spend its time?"""
    from kafka_ferry.copy.planner import plan_copy
    from kafka_ferry.copy.runner import copy_group
    from kafka_ferry.core.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import KafkaClusterHook
    from kafka_ferry.io.state_store import MigrationStateStore

    spec = load_spec(spec_path)
    spec = spec.model_copy(update={"name": spec.name + "-profile", "state_topic": f"kafka-ferry.{spec.name}-prof",
                                   "topics": spec.topics.model_copy(update={"rename": type(spec.topics.rename)(
                                       policy="prefix", prefix="ferryprof.")})})
    source, destination = KafkaClusterHook(SOURCE_CONN), KafkaClusterHook(DESTINATION_CONN)
    from kafka_ferry.io.provisioning import apply_topic_plan, compute_topic_plan, ensure_internal_topics

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
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    records, partitions, size = args.records, args.partitions, args.record_bytes
    name = f"tput-{uuid.uuid4().hex[:6]}"
    topic = f"{name}.data"
    work = Path(tempfile.mkdtemp(prefix="kferry-bench-"))
    os.environ["KFERRY_WORK_DIR"] = str(work)
    setup_connections(args.master)

    create_topic(tb.SOURCE.bootstrap, topic, partitions)
    results: dict = {"records": records, "partitions": partitions, "record_bytes": size,
                     "seed": rate(records, size, seed(topic, partitions, records, size))}

    spec_path = write_spec(work, name, topic, records // partitions + 1)
    ferry_s, report = kafka_ferry_copy(spec_path, args.master)
    if report["records_copied"] != records:
        raise RuntimeError(f"kafka-ferry copied {report['records_copied']} of {records}")
    results["kafka_ferry"] = {**rate(records, size, ferry_s), "job_s": report["duration_s"],
                              "slowest_partition_s": max(p["duration_s"] for p in report["partitions"]),
                              "syncs_written": report["syncs_written"]}

    create_topic(tb.DESTINATION.bootstrap, f"raw.{topic}", partitions)
    results["raw_loop"] = rate(records, size, raw_copy(topic, f"raw.{topic}", partitions, records))

    if not args.skip_mm2:
        mm2 = mm2_copy(work, topic, partitions, records)
        results["mirrormaker2"] = {**rate(records, size, mm2["total_s"]),
                                   "steady": rate(mm2["steady_records"], size, mm2["steady_s"])}
        results["ratio_ferry_to_mm2"] = round(results["kafka_ferry"]["records_per_s"]
                                              / results["mirrormaker2"]["records_per_s"], 2)
    results["ratio_ferry_to_raw"] = round(results["kafka_ferry"]["records_per_s"]
                                          / results["raw_loop"]["records_per_s"], 2)
    print(json.dumps(results, indent=1))
    if args.profile:
        print(profile_one_partition(spec_path, topic))
    return 0


if __name__ == "__main__":
    sys.exit(main())
