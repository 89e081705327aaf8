"""Per-record cost of the copier without Spark: copy an existing source topic in-process, then the raw loop,
then the floor loop (``raw_loop.floor_copy``: the copier's lanes, settings and headers with no bookkeeping).

    .venv/bin/python bench/copy_inprocess.py --topic <seeded source topic> [--partitions 12] [--profile]

For iterating on the hot loop on a noisy machine: prints wall and CPU seconds (process_time, which
includes librdkafka's threads) of each, so CPU per record can be compared even when wall time is noise.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from _common import end_offsets, tb
from copy_throughput import DESTINATION_CONN, SOURCE_CONN, create_topic, setup_connections, write_spec
from raw_loop import floor_copy, raw_copy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kferry-inproc-"))
    os.environ["KFERRY_WORK_DIR"] = str(work)
    setup_connections("local[1]")
    from kafka_ferry.copy.plan import CopyPlan
    from kafka_ferry.copy.runner import copy_plan_in_process
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.operators.copy import PlanCopyBatchOperator
    from kafka_ferry.operators.provision import ProvisionMirrorTopicsOperator

    records = end_offsets(tb.SOURCE.bootstrap, args.topic, args.partitions)
    name = f"inproc-{uuid.uuid4().hex[:6]}"
    spec_path = write_spec(work, name, args.topic, records)
    spec = yaml.safe_load(spec_path.read_text())
    spec["topics"]["rename"]["prefix"] = f"{name}."  # a fresh destination topic every run
    spec_path.write_text(yaml.safe_dump(spec))
    ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=str(spec_path)).execute({})
    plan_info = PlanCopyBatchOperator(task_id="plan_copy", spec_path=str(spec_path)).execute({})
    plan = CopyPlan.read(plan_info["plan_path"])
    configs = {"source": kafka_cluster(SOURCE_CONN).client_config,
               "destination": kafka_cluster(DESTINATION_CONN).client_config}
    profiler = cProfile.Profile() if args.profile else None
    wall, cpu = time.monotonic(), time.process_time()
    if profiler:
        profiler.enable()
    rows = copy_plan_in_process(plan, configs)
    if profiler:
        profiler.disable()
    ferry = {"wall_s": round(time.monotonic() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2),
             "records": sum(r["records_copied"] for r in rows), "syncs": sum(r["syncs_written"] for r in rows),
             "partition_s": [r["duration_s"] for r in rows]}
    create_topic(tb.DESTINATION.bootstrap, f"raw.{name}", args.partitions)
    wall, cpu = time.monotonic(), time.process_time()
    raw_copy(args.topic, f"raw.{name}", args.partitions, records)
    raw = {"wall_s": round(time.monotonic() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2)}
    create_topic(tb.DESTINATION.bootstrap, f"floor.{name}", args.partitions)
    wall, cpu = time.monotonic(), time.process_time()
    floor_copy(args.topic, f"floor.{name}", args.partitions)
    floor = {"wall_s": round(time.monotonic() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2)}
    for r in (ferry, raw, floor):
        r["us_cpu_per_record"] = round(r["cpu_s"] / records * 1e6, 1)
        r["records_per_s"] = round(records / r["wall_s"])
    # Per record, the copier against the raw loop: >= 1 means the copier costs no more than the raw pipe.
    # ... and against the floor (the same lanes, settings and headers, no bookkeeping): ~1 means nothing is left
    # to cut in the copier's own steps.
    print(json.dumps({"records": records, "kafka_ferry_in_process": ferry, "raw_loop": raw, "floor_loop": floor,
                      "ratio_raw_cpu_to_ferry_cpu": round(raw["cpu_s"] / ferry["cpu_s"], 2),
                      "ratio_floor_cpu_to_ferry_cpu": round(floor["cpu_s"] / ferry["cpu_s"], 2),
                      "ratio_ferry_rate_to_raw_rate": round(ferry["records_per_s"] / raw["records_per_s"], 2)},
                     indent=1))
    if profiler:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).sort_stats("tottime")
        stats.print_stats(20)
        stats.print_callers("flush|consume'")
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
