"""What the decode check costs a catch-up run: reading the copied records back vs reading and decoding them.

    .venv/bin/python bench/decode_check_cost.py [--records 500000] [--partitions 12]

One run, side by side, on one destination topic of Avro records in the Confluent wire format (a record of ten
fields, ~200 bytes, one schema registered on an AxonOps registry this script starts and stops):
  (a) the raw read: `kafka.reads.read_ranges` over every record, nothing else (the floor of any check);
  (b) the decode check: `schemas.decode_check.check_decoding` over the same ranges (the read, plus fastavro on
      every value against the schema fetched once from the registry, plus the per-partition marks);
  (c) the decoder alone: `core.schemas.schema_decode.PayloadChecker` over the same payloads held in memory.
Prints wall and CPU seconds, CPU per record, and the ratio (b)/(a) as JSON. Needs the test bed up.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import struct
import sys
import time
import uuid

import fastavro
from _common import create_topic, tb
from confluent_kafka import Producer

import schema_registries as srtb

REGISTRY = srtb.RegistrySpec("bench-decode", "axonops", srtb._port("KFERRY_BENCH_SR_PORT", 18191))
SCHEMA = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "string"}, {"name": "customer", "type": "string"}, {"name": "n", "type": "long"},
    {"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}, {"name": "note", "type": "string"},
    {"name": "paid", "type": "boolean"}, {"name": "at", "type": "long"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}}]}


def seed(topic: str, partitions: int, records: int, schema_id: int) -> list[bytes]:
    """Avro values in the wire format to the destination topic; returns one partition's payloads for (c)."""
    parsed = fastavro.parse_schema(SCHEMA)
    rng = random.Random(7)
    producer = Producer({"bootstrap.servers": tb.DESTINATION.bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576})
    header = struct.pack(">bI", 0, schema_id)
    sample = []
    for i in range(records):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {
            "id": f"order-{i}", "customer": f"customer-{rng.randrange(10_000)}", "n": i, "cents": rng.randrange(10**6),
            "currency": "EUR", "note": "x" * rng.randrange(100, 200), "paid": bool(i % 2), "at": 1_795_000_000_000 + i,
            "tags": ["a", "bb", "ccc"][: i % 4], "status": ("NEW", "PAID", "SHIPPED")[i % 3]})
        value = header + out.getvalue()
        if i % partitions == 0:
            sample.append(value)
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0
    return sample


def timed(fn):
    wall, cpu = time.monotonic(), time.process_time()
    out = fn()
    return out, round(time.monotonic() - wall, 3), round(time.process_time() - cpu, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=12)
    args = parser.parse_args()

    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    from kafka_ferry.core.schemas.schema_decode import PayloadChecker
    from kafka_ferry.kafka.cluster import KafkaCluster
    from kafka_ferry.kafka.reads import read_ranges
    from kafka_ferry.registry.client import RegistryConnection, SchemaRegistry
    from kafka_ferry.schemas.decode_check import check_decoding
    from kafka_ferry.state.store import MigrationStateStore

    srtb.up((REGISTRY,))
    try:
        client = SchemaRegistryClient({"url": REGISTRY.url})
        topic = f"bench-decode-{uuid.uuid4().hex[:6]}"
        schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(SCHEMA), "AVRO"))
        create_topic(tb.DESTINATION.bootstrap, topic, args.partitions)
        sample = seed(topic, args.partitions, args.records, schema_id)
        destination = KafkaCluster("destination", {"bootstrap.servers": tb.DESTINATION.bootstrap})
        ends = destination.list_offsets([(topic, p) for p in range(args.partitions)])
        ranges = {tp: (0, end) for tp, end in ends.items()}
        assert sum(ends.values()) == args.records
        store = MigrationStateStore(destination, f"kafka-ferry.{topic}.state")
        store.ensure_topic()
        registry = SchemaRegistry(RegistryConnection("bench", REGISTRY.url))

        count, a_wall, a_cpu = timed(lambda: sum(1 for _ in read_ranges(destination, ranges)))
        assert count == args.records
        report, b_wall, b_cpu = timed(lambda: check_decoding(destination, registry, store, "bench", ranges))
        tally = report.topics[topic]
        assert (tally.records, tally.values_decoded, tally.failed) == (args.records, args.records, 0)
        checker = PayloadChecker(registry.registered_schema)
        verdicts, c_wall, c_cpu = timed(lambda: [checker.check(v).outcome for v in sample])
        assert set(verdicts) == {"decoded"}
        registry.close()
        per = 1e6 / args.records
        print(json.dumps({
            "records": args.records, "partitions": args.partitions, "value_bytes": round(sum(map(len, sample))
                                                                                       / len(sample)),
            "a_raw_read": {"wall_s": a_wall, "cpu_s": a_cpu, "rec_per_s": round(args.records / a_wall),
                           "cpu_us_per_record": round(a_cpu * per, 2)},
            "b_decode_check": {"wall_s": b_wall, "cpu_s": b_cpu, "rec_per_s": round(args.records / b_wall),
                               "cpu_us_per_record": round(b_cpu * per, 2)},
            "c_decoder_alone": {"records": len(sample), "cpu_us_per_record": round(c_cpu * 1e6 / len(sample), 2)},
            "b_over_a_wall": round(b_wall / a_wall, 2), "b_over_a_cpu": round(b_cpu / a_cpu, 2),
        }, indent=1))
    finally:
        srtb.stop(REGISTRY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
