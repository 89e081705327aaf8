"""The batch window's copy path: how close the rate limit holds, and how far past its deadline a cut batch runs.

    .venv/bin/python bench/batch_window.py [--records 1000000] [--partitions 12] [--record-bytes 1024]
                                           [--limits 10000000,25000000] [--cuts 5,15,30] [--tasks 2]

One run, on the test bed: seed one source topic, then
(a) throttle accuracy: for each limit (``copy.max_bytes_per_second``), copy the whole topic as one batch into a
    fresh destination topic and compare the bytes per second achieved while copying (keys plus values, over the
    wall clock of the partition tasks) with the limit (``accuracy`` = achieved / limit; within 0.9-1.1 wanted);
(b) deadline overrun: for each cut (seconds), copy the topic as one batch of a fresh migration whose
    ``copy.window`` ends that many seconds after the run was due (planned at once), under the lowest limit so it
    cannot finish first; prints how far past the deadline the partition tasks returned (every partition stopped
    at a chunk boundary, progress and syncs written) and the report's ``overrun_s`` (the batch closed: lag
    measured, report kept; <= 2 s wanted).
Both run the partitions as the batch does, split over ``--tasks`` groups like Spark tasks (each its share of the
limit, by offsets) with the spec's lanes in each (``copy.catch_up.threads_engine``: the same ``copy_group`` the
Spark engines run), in this process: no engine start inside the clock. At the end every topic of the run is
deleted. Prints JSON. Needs the test bed up; a bench, not a test (a busy machine moves every figure).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import uuid
from contextlib import nullcontext
from pathlib import Path

import yaml
from _common import create_topic, drop_topics, seed, settle, tb
from copy_throughput import DESTINATION_CONN, SOURCE_CONN, setup_connections, write_spec


def migration(work: Path, name: str, topic: str, per_partition: int, copy: dict) -> Path:
    """A spec copying ``topic`` whole in one batch into ``<name>.<topic>``, with these copy settings; provisioned."""
    from kafka_ferry.operators.provision import ProvisionMirrorTopicsOperator

    path = write_spec(work, name, topic, per_partition, prefix=f"{name}.")
    spec = yaml.safe_load(path.read_text())
    spec["copy"].update(copy)
    path.write_text(yaml.safe_dump(spec))
    ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=str(path)).execute({})
    return path


def one_batch(spec_path: Path, tasks: int, windowed: bool = False) -> tuple[dict, float, float]:
    """Plan (the run due now) and copy one batch; (report, seconds the partition tasks took, epoch s they ended)."""
    from kafka_ferry.copy.batch_runner import run_batch
    from kafka_ferry.copy.catch_up import threads_engine
    from kafka_ferry.copy.plan import CopyPlan, work_dir
    from kafka_ferry.copy.planning import RunWindow, plan_copy
    from kafka_ferry.core.specs.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.state.store import MigrationStateStore

    spec = load_spec(spec_path)
    source, destination = kafka_cluster(SOURCE_CONN), kafka_cluster(DESTINATION_CONN)
    store = MigrationStateStore(destination, spec.state_topic_name)
    window = RunWindow(int(time.time() * 1000)) if windowed else None
    plan = plan_copy(spec, source, destination, store, window=window)
    plan_path = plan.write(work_dir(spec.name))
    configs = {"source": source.client_config, "destination": destination.client_config}
    run_plan, timing = threads_engine(tasks), {}

    def run_tasks(plan: CopyPlan, configs, fault):
        started = time.monotonic()
        rows = run_plan(plan, configs)
        timing["seconds"], timing["ended"] = time.monotonic() - started, time.time()
        return rows

    report = run_batch(plan, configs, lambda: nullcontext(run_tasks), plan_path.with_name("report.json"))
    return report, timing["seconds"], timing["ended"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--limits", default="10000000,25000000", help="bytes per second, comma-separated")
    parser.add_argument("--cuts", default="5,15,30", help="window lengths in seconds, comma-separated")
    parser.add_argument("--tasks", type=int, default=2, help="groups the partitions are split over (Spark tasks)")
    args = parser.parse_args()
    name = f"bwin-{uuid.uuid4().hex[:6]}"
    work = Path(tempfile.mkdtemp(prefix="kferry-bench-"))
    os.environ["KFERRY_WORK_DIR"] = str(work)
    setup_connections("local[2]")
    try:
        print(json.dumps(measure(args, name, work), indent=1))
        return 0
    finally:
        drop_topics(name)
        shutil.rmtree(work, ignore_errors=True)


def measure(args, name: str, work: Path) -> dict:
    topic = f"{name}.data"
    records, partitions, size = args.records, args.partitions, args.record_bytes
    limits = [int(float(x)) for x in args.limits.split(",")]
    cuts = [float(x) for x in args.cuts.split(",")]
    create_topic(tb.SOURCE.bootstrap, topic, partitions)
    results: dict = {"records": records, "partitions": partitions, "record_bytes": size, "tasks": args.tasks,
                     "seed_s": round(seed(topic, partitions, records, size), 1), "throttle": [], "deadline": []}
    per_partition = records // partitions + 1
    for i, limit in enumerate(limits):
        spec = migration(work, f"{name}-l{i}", topic, per_partition, {"max_bytes_per_second": limit})
        settle()
        report, seconds, _ = one_batch(spec, args.tasks)
        if report["records_copied"] != records:
            raise RuntimeError(f"limit {limit}: copied {report['records_copied']} of {records}")
        achieved = report["bytes_copied"] / seconds
        results["throttle"].append({"limit_bytes_per_s": limit, "achieved_bytes_per_s": round(achieved),
                                    "accuracy": round(achieved / limit, 3), "copy_s": round(seconds, 2),
                                    "batch_s": report["duration_s"], "throttled_s": report["throttled_s"]})
    for i, cut in enumerate(cuts):
        window = f"{int(cut)}s"
        spec = migration(work, f"{name}-c{i}", topic, per_partition,
                         {"max_bytes_per_second": min(limits), "window": window})
        settle()
        report, _, ended = one_batch(spec, args.tasks, windowed=True)
        deadline_s = report["deadline_ms"] / 1000
        results["deadline"].append({
            "window": window, "stop_reason": report["stop_reason"], "records_copied": report["records_copied"],
            "tasks_overrun_s": round(max(0.0, ended - deadline_s), 3), "report_overrun_s": report["overrun_s"],
            "partitions_stopped_at_deadline": sum(p["stop_reason"] == "deadline" for p in report["partitions"])})
    return results


if __name__ == "__main__":
    raise SystemExit(main())
