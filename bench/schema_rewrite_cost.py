"""What remap-mode schema migration costs the copy: wire-format records copied in-process, ids kept vs remapped.

    .venv/bin/python bench/schema_rewrite_cost.py [--records 500000] [--partitions 12] [--record-bytes 1024]

One run, side by side: seed one source topic whose values are Confluent wire format (magic byte, a 4-byte schema id
out of 20, then the payload), then copy it twice with the copier in this process (no Spark, so the difference is
the copier's): (a) no id map, keys and values byte for byte, (b) remap mode, every value's id rewritten through
``core.schemas.schema_wire.SchemaIdRewriter`` (unknown_id_policy: fail). Prints wall and CPU seconds (process_time,
librdkafka's threads included), CPU per record, and the ratios (b)/(a) as JSON. Each copy checks its count; the
rewritten copy also checks one destination record's id. Needs the test bed up.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from _common import tb
from confluent_kafka import Consumer, Producer, TopicPartition
from copy_throughput import DESTINATION_CONN, SOURCE_CONN, create_topic, setup_connections, write_spec

IDS = range(100, 120)
MAPPED = {str(i): i + 1000 for i in IDS}


def seed_wire_format(topic: str, partitions: int, records: int, record_bytes: int) -> None:
    producer = Producer({"bootstrap.servers": tb.SOURCE.bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576})
    body = os.urandom(max(0, record_bytes - 5))
    headers = [struct.pack(">bI", 0, i) for i in IDS]
    rng = random.Random(7)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=headers[rng.randrange(len(headers))] + body,
                                 partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0


def copy_once(work: Path, topic: str, records: int, schema_id_map: dict | None) -> tuple[dict, str]:
    from kafka_ferry.copy.plan import CopyPlan
    from kafka_ferry.copy.runner import copy_plan_in_process
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.operators.copy import PlanCopyBatchOperator
    from kafka_ferry.operators.provision import ProvisionMirrorTopicsOperator

    name = f"rw-{uuid.uuid4().hex[:6]}"
    spec_path = write_spec(work, name, topic, records)
    spec = yaml.safe_load(spec_path.read_text())
    spec["topics"]["rename"]["prefix"] = f"{name}."  # a fresh destination topic (and state) per copy
    spec_path.write_text(yaml.safe_dump(spec))
    ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=str(spec_path)).execute({})
    plan = CopyPlan.read(PlanCopyBatchOperator(task_id="plan_copy", spec_path=str(spec_path)).execute({})["plan_path"])
    if schema_id_map is not None:
        plan = dataclasses.replace(plan, schema_id_map=schema_id_map, unknown_schema_id_policy="fail")
    configs = {"source": kafka_cluster(SOURCE_CONN).client_config,
               "destination": kafka_cluster(DESTINATION_CONN).client_config}
    wall, cpu = time.monotonic(), time.process_time()
    rows = copy_plan_in_process(plan, configs)
    out = {"wall_s": round(time.monotonic() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2),
           "records": sum(r["records_copied"] for r in rows)}
    if out["records"] != records:
        raise RuntimeError(f"copied {out['records']} of {records}")
    out["us_cpu_per_record"] = round(out["cpu_s"] / records * 1e6, 2)
    out["records_per_s"] = round(records / out["wall_s"])
    return out, f"{name}.{topic}"


def first_value(topic: str) -> bytes:
    consumer = Consumer({"bootstrap.servers": tb.DESTINATION.bootstrap, "group.id": "bench-rewrite-check"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        for _ in range(30):
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                return msg.value()
        raise RuntimeError(f"nothing read from {topic}")
    finally:
        consumer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--record-bytes", type=int, default=1024)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kferry-rewrite-"))
    os.environ["KFERRY_WORK_DIR"] = str(work)
    setup_connections("local[1]")
    topic = f"rewrite-{uuid.uuid4().hex[:6]}.data"
    create_topic(tb.SOURCE.bootstrap, topic, args.partitions)
    seed_wire_format(topic, args.partitions, args.records, args.record_bytes)

    kept, _ = copy_once(work, topic, args.records, None)
    rewritten, destination = copy_once(work, topic, args.records, MAPPED)
    value = first_value(destination)
    if value[0] != 0 or struct.unpack(">I", value[1:5])[0] - 1000 not in IDS:
        raise RuntimeError(f"{destination}: the first value does not carry a rewritten id: {value[:5]!r}")
    print(json.dumps({
        "records": args.records, "record_bytes": args.record_bytes, "ids": len(IDS),
        "ids_kept": kept, "ids_rewritten": rewritten,
        "ratio_rewritten_cpu_to_kept_cpu": round(rewritten["cpu_s"] / kept["cpu_s"], 2),
        "ratio_rewritten_rate_to_kept_rate": round(rewritten["records_per_s"] / kept["records_per_s"], 2),
        "rewrite_us_per_record": round(rewritten["us_cpu_per_record"] - kept["us_cpu_per_record"], 2),
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
