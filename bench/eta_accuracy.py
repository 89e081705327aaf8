"""How right the ETA counted in batches is: predicted over actual time to lag 0, batch by batch.

    .venv/bin/python bench/eta_accuracy.py [--partitions 19] [--per-partition 2000] [--cap 400]
                                           [--inflow 50] [--record-bytes 200] [--tasks 2]

One run, on the test bed: seed a source topic of ``--partitions`` partitions with ``--per-partition`` records
each, start a live producer adding ``--inflow`` records per second round-robin for the whole run, and copy it in
catch-up batches of at most ``--cap`` records per partition (``copy.max_records_per_partition``), back to back,
each as the DAG's copy does (plan, ``run_batch`` on the threads engine: the same ``copy_group`` the Spark engines
run, in this process), each followed by the copy report task's ``record_backlog`` (the backlog record and its
ETAs, ``core.backlog_eta``). After each batch it keeps the ETA counted in batches (the first ETA) and the time;
lag 0 is reached by the first batch that copies everything its partitions held when it started (its report's
``stop_reason`` is ``caught_up``, not ``limit``). Then per batch: predicted seconds to lag 0, actual seconds
from that batch's end to the end of the last one, and their ratio (1.0 is exact; the issue's acceptance range
for a quiet run is 0.75-1.25). The producer stops and the run's topics are deleted at the end. Prints JSON.
Needs the test bed up; a bench, not a test (a busy machine moves every figure).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
import uuid
from pathlib import Path

import yaml
from _common import create_topic, drop_topics, seed, tb
from batch_window import one_batch
from copy_throughput import setup_connections, write_spec


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=19)
    parser.add_argument("--per-partition", type=int, default=2000, help="records per partition seeded first")
    parser.add_argument("--cap", type=int, default=400, help="copy.max_records_per_partition")
    parser.add_argument("--inflow", type=float, default=50.0, help="the live producer's records per second")
    parser.add_argument("--record-bytes", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=2, help="partition groups, as Spark tasks")
    parser.add_argument("--max-batches", type=int, default=200, help="give up after this many batches")
    args = parser.parse_args()

    from kafka_ferry.copy.backlog import record_backlog
    from kafka_ferry.core.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.operators.provision import ProvisionMirrorTopicsOperator
    from kafka_ferry.state.store import MigrationStateStore

    run = f"eta-{uuid.uuid4().hex[:8]}"
    topic = f"bench.{run}"
    work = Path(tempfile.mkdtemp(prefix="kferry-eta-"))
    os.environ.setdefault("KFERRY_WORK_DIR", str(work / "work"))
    setup_connections("local[2]")
    producer = None
    try:
        create_topic(tb.SOURCE.bootstrap, topic, args.partitions)
        seed(topic, args.partitions, args.partitions * args.per_partition, args.record_bytes)
        path = write_spec(work, run, topic, args.per_partition, prefix=f"{run}.")
        spec_data = yaml.safe_load(path.read_text())
        spec_data["copy"]["max_records_per_partition"] = args.cap
        path.write_text(yaml.safe_dump(spec_data))
        ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=str(path)).execute({})
        spec = load_spec(path)
        store = MigrationStateStore(kafka_cluster(spec_data["destination"]["connection_id"]), spec.state_topic_name)

        producer = LiveProducer(topic, args.partitions, args.inflow, args.record_bytes)
        producer.start()
        batches = []
        for _ in range(args.max_batches):
            report, _, ended = one_batch(path, args.tasks)
            backlog = record_backlog(spec, report, store)
            counted = next((e for e in backlog["etas"] if e["label"].startswith("counting batches")), None)
            capped = report.get("stop_reason") != "caught_up"  # a cap (or a window) stopped it short
            batches.append({"batch": report["batch_id"], "ended": ended, "duration_s": report["duration_s"],
                            "records": report["records_copied"], "lag_after": report["lag_after_total"],
                            "capped": capped, "predicted_s": counted and counted["seconds"],
                            "predicted_batches": counted and counted["batches"],
                            "eta": counted and counted["sentence"]})
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

    last_end = batches[-1]["ended"]
    rows = []
    for i, b in enumerate(batches[:-1]):
        actual = last_end - b["ended"]
        predicted = b["predicted_s"]
        rows.append({"after_batch": i + 1, "predicted_s": None if predicted is None else round(predicted, 1),
                     "actual_s": round(actual, 1), "batches_predicted": b["predicted_batches"],
                     "batches_actual": len(batches) - 1 - i,
                     "ratio": None if not predicted or actual <= 0 else round(predicted / actual, 2)})
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    print(json.dumps({"partitions": args.partitions, "cap": args.cap, "inflow_per_s": args.inflow,
                      "seeded_per_partition": args.per_partition, "batches": len(batches),
                      "produced_live": producer.sent if producer else 0, "per_batch": rows,
                      "ratio_first": ratios[0] if ratios else None,
                      "ratio_median": sorted(ratios)[len(ratios) // 2] if ratios else None,
                      "batch_durations_s": [round(b["duration_s"], 1) for b in batches]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
