"""How right the ETA counted in batches is: predicted over actual time to lag 0, batch by batch, each batch a
real catch-up run on Spark.

    .venv/bin/python bench/eta_accuracy.py [--engine spark-submit|spark-connect] [--partitions 19]
                                           [--per-partition 2400] [--cap 400] [--inflow 50] [--record-bytes 200]
                                           [--quick] [--out FILE]

One run, on the test bed: seed a source topic of ``--partitions`` partitions with ``--per-partition`` records
each, start a live producer adding ``--inflow`` records per second round-robin for the whole run, and catch up in
batches of at most ``--cap`` records per partition (``copy.max_records_per_partition``), back to back. Each batch
is the DAG's catch-up run (``plan_copy >> copy_batch >> copy_report``, the operators themselves, their XCom handed
over as the DAG does): the plan, then the copy task on the spec's Spark engine (spark-submit: a driver JVM and a
SparkContext per batch, as the catch-up DAG runs it; ``--engine spark-connect``: a client of the test bed's
running Connect server, ``KFERRY_SPARK_CONNECT_PORT``), then the report task, which keeps the backlog record and
its ETAs (``core.batches.backlog_eta``; what ``kafka-ferry status`` and the run page show after that batch). So every
batch pays the fixed cost a real run pays (planning, the engine's start, the report), and the ETA predicts from
what it measured of the batches before, as in the field. The spark-submit engine's class archive is written
before the clock when missing (a worker that ran a batch before has it; its seconds are printed apart).

After each batch the bench keeps the ETA counted in batches (the first ETA of the report's backlog record) and
the batch's end (the report's ``finished_at_ms``, which the ETA counts from). Lag 0 is reached by the first batch
that copies everything its partitions held when it started (its ``stop_reason`` is ``caught_up``, not ``limit``).
Then per batch: predicted seconds to lag 0, actual seconds from that batch's end to the end of the lag-0 batch,
batches predicted and taken, and their ratio (1.0 is exact; the issue's acceptance range for a quiet run is
0.75-1.25), with what the ETA measured then (fixed cost per batch, time between batches, producers' rate).
``--quick``: 800 records per partition (three batches), to prove the bench works on a busy machine; its ratios
are no figures. The producer stops and the run's topics are deleted at the end. Prints JSON, with the run's
wall time, after the tasks' logs on stdout (``--out FILE``: the JSON alone there too). Needs the test bed up;
a bench, not a test (a busy machine moves every figure).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import yaml
from _common import create_topic, drop_topics, seed, tb
from copy_throughput import (
    CONNECT_CONN,
    SPARK_CONN,
    _TaskInstance,
    driver_archive,
    setup_connections,
    start_connect_server,
    write_spec,
)

ENGINES = {"spark-submit": SPARK_CONN, "spark-connect": CONNECT_CONN}


class LiveProducer(threading.Thread):
    """Adds ``rate`` records per second to ``topic`` round-robin until stopped (the tenant's producers)."""

    def __init__(self, topic: str, partitions: int, rate: float, record_bytes: int):
        super().__init__(daemon=True)
        self.topic, self.partitions, self.rate, self.payload = topic, partitions, rate, os.urandom(record_bytes)
        self.stop_event, self.sent = threading.Event(), 0

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": tb.SOURCE.bootstrap, "linger.ms": 20})
        started = time.monotonic()
        while not self.stop_event.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                producer.produce(self.topic, key=str(self.sent).encode(), value=self.payload,
                                 partition=self.sent % self.partitions)
                self.sent += 1
            producer.poll(0.05)
        producer.flush(60)


def catch_up_run(spec_path: Path, spark_conn: str) -> dict:
    """One catch-up run as the DAG chains it: plan_copy >> copy_batch >> copy_report; the report task's return
    (the batch report with its ``backlog`` record: the ETAs ``status`` shows after this batch)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from kafka_ferry.operators.copy import CopyBatchSparkOperator, CopyReportOperator, PlanCopyBatchOperator

    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=str(spec_path)).execute({})
    context = {"ti": _TaskInstance({"plan_copy": plan})}
    try:
        CopyBatchSparkOperator(task_id="copy_batch", spec_path=str(spec_path), conn_id=spark_conn).execute(context)
    except AirflowSkipException:  # an empty plan: the DAG skips the copy and reports
        pass
    return CopyReportOperator(task_id="copy_report", spec_path=str(spec_path)).execute(context)


def warm_archive(work: Path, run: str, partitions: int, attempts: int = 3) -> dict:
    """The driver's class archive before the clock (``copy_throughput.driver_archive``), tried again when its batch
    fails: writing the archive at the JVM's exit is the heaviest batch there is, and on a loaded machine it can
    stall past the copy lease (``CopyLeaseLost``), where the DAG's task would retry."""
    for attempt in range(1, attempts + 1):
        try:
            return {**driver_archive(work, f"{run}-w{attempt}", partitions), "attempts": attempt}
        except Exception as exc:  # any failure of the warm-up batch: try again, then give up
            if attempt == attempts:
                raise
            print(f"warm-up batch {attempt} failed ({type(exc).__name__}); again", file=sys.stderr)
    raise AssertionError("unreachable")


def counted(report: dict) -> dict | None:
    return next((e for e in report["backlog"]["etas"] if e["label"].startswith("counting batches")), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=sorted(ENGINES), default="spark-submit",
                        help="the spec's Spark engine for every batch")
    parser.add_argument("--partitions", type=int, default=19)
    parser.add_argument("--per-partition", type=int, default=None,
                        help="records per partition seeded first (default 2400; --quick: 800)")
    parser.add_argument("--cap", type=int, default=400, help="copy.max_records_per_partition")
    parser.add_argument("--inflow", type=float, default=50.0, help="the live producer's records per second")
    parser.add_argument("--record-bytes", type=int, default=200)
    parser.add_argument("--master", default="local[2]", help="spark-submit's master (the Connect server's cores)")
    parser.add_argument("--max-batches", type=int, default=40, help="give up after this many batches")
    parser.add_argument("--quick", action="store_true", help="800 records per partition: proves the bench runs")
    parser.add_argument("--out", type=Path, help="also write the JSON here (stdout carries the tasks' logs too)")
    args = parser.parse_args()
    per_partition = args.per_partition or (800 if args.quick else 2400)

    from kafka_ferry.operators.provision import ProvisionMirrorTopicsOperator

    began = time.monotonic()
    run = f"eta-{uuid.uuid4().hex[:8]}"
    topic = f"bench.{run}"
    work = Path(tempfile.mkdtemp(prefix="kferry-eta-"))
    os.environ["KFERRY_WORK_DIR"] = str(work / "work")
    setup_connections(args.master)
    conn = ENGINES[args.engine]
    producer, batches, warm, connect_started = None, [], {}, False
    try:
        if args.engine == "spark-connect":
            server_s, connect_started = start_connect_server(args.master)
            warm = {"connect_server_s": round(server_s, 1), "connect_server_started_here": connect_started}
        else:
            warm = {"driver_archive": warm_archive(work / "work", run, args.partitions)}
        create_topic(tb.SOURCE.bootstrap, topic, args.partitions)
        seed(topic, args.partitions, args.partitions * per_partition, args.record_bytes)
        path = write_spec(work, run, topic, per_partition, prefix=f"{run}.", spark_conn=conn)
        spec_data = yaml.safe_load(path.read_text())
        spec_data["copy"]["max_records_per_partition"] = args.cap
        path.write_text(yaml.safe_dump(spec_data))
        ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=str(path)).execute({})

        producer = LiveProducer(topic, args.partitions, args.inflow, args.record_bytes)
        producer.start()
        for _ in range(args.max_batches):
            started = time.time()
            report = catch_up_run(path, conn)
            eta, backlog = counted(report), report["backlog"]
            capped = report.get("stop_reason") != "caught_up"  # a cap (or a window) stopped it short
            batches.append({"ended": int(report["finished_at_ms"]) / 1000, "run_s": time.time() - started,
                            "duration_s": report["duration_s"], "records": report["records_copied"],
                            "lag_after": report["lag_after_total"], "capped": capped,
                            "predicted_s": eta and eta["seconds"], "predicted_batches": eta and eta["batches"],
                            "inflow_per_s": backlog.get("inflow_records_per_s"),
                            "eta": eta and eta["sentence"]})
            if not capped:
                break
        else:
            print(json.dumps({"error": f"no lag 0 within {args.max_batches} batches", "batches": batches}))
            return 1
    finally:
        if producer is not None:
            producer.stop_event.set()
            producer.join(120)
        drop_topics(run)
        if connect_started:  # a server this run started: stopped by its run dir (testbed/spark_connect.py)
            import spark_connect

            spark_connect.down()

    last_end = batches[-1]["ended"]
    rows = []
    for i, b in enumerate(batches[:-1]):
        actual = last_end - b["ended"]
        predicted = b["predicted_s"]
        rows.append({"after_batch": i + 1, "predicted_s": None if predicted is None else round(predicted, 1),
                     "actual_s": round(actual, 1), "batches_predicted": b["predicted_batches"],
                     "batches_actual": len(batches) - 1 - i,
                     "ratio": None if not predicted or actual <= 0 else round(predicted / actual, 2),
                     "inflow_measured_per_s": b["inflow_per_s"], "eta": b["eta"]})
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    result = json.dumps({"engine": args.engine, "partitions": args.partitions, "cap": args.cap,
                         "inflow_per_s": args.inflow, "seeded_per_partition": per_partition, "quick": args.quick,
                         "batches": len(batches), "produced_live": producer.sent if producer else 0, **warm,
                         "per_batch": rows, "ratio_first": ratios[0] if ratios else None,
                         "ratio_median": round(statistics.median(ratios), 2) if ratios else None,
                         "ratio_range": [min(ratios), max(ratios)] if ratios else None,
                         "batch_durations_s": [round(b["duration_s"], 1) for b in batches],
                         "run_s_per_batch": [round(b["run_s"], 1) for b in batches],
                         "bench_wall_s": round(time.monotonic() - began, 1)}, indent=1)
    if args.out:
        args.out.write_text(result + "\n")
    print(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
