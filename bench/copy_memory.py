"""Peak memory of a copy against the backlog: the copier's RSS must not grow with the records it copies.

    .venv/bin/python bench/copy_memory.py [--small 1000000] [--large 10000000] [--record-bytes 100]
                                          [--partitions 12]

Seeds one source topic per backlog, plans one batch covering all of it, and runs the copy job's own
entry point (``copy_batch.py --in-process``: the copier a Spark worker runs, in one process) as a child;
the child's peak RSS comes from the kernel (``ru_maxrss`` of the waited child). Prints both peaks and
their ratio as JSON. What bounds the copier's memory is configuration, not the backlog: the consumer's
prefetch queue (``queued.max.messages.kbytes``), the producer's queue and one consume() batch.
Small records by default so that 10M records fit the test bed's disk in a minute of seeding.
Needs the test bed up. Memory, not speed: still, run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _common import REPO, end_offsets, seed, tb
from copy_throughput import (
    DESTINATION_CONN,
    SOURCE_CONN,
    create_topic,
    setup_connections,
    write_spec,
)

# The child measures its own child: ru_maxrss of RUSAGE_CHILDREN is the largest child waited for, so
# each copy gets a fresh measuring process and the two figures cannot mix.
MEASURE = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(done.returncode)")


def copy_peak_rss(work: Path, records: int, partitions: int, record_bytes: int) -> dict:
    """Seed `records`, plan one batch over all of them, copy in a child; its peak RSS in MB."""
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.kafka.configs import encode_cluster_configs
    from kafka_ferry.operators.copy import PlanCopyBatchOperator
    from kafka_ferry.operators.provision import ProvisionMirrorTopicsOperator

    name = f"mem-{records // 1_000_000}m-{uuid.uuid4().hex[:6]}"
    topic = f"{name}.data"
    create_topic(tb.SOURCE.bootstrap, topic, partitions)
    seed_s = seed(topic, partitions, records, record_bytes)
    spec_path = write_spec(work, name, topic, records, prefix="ferrymem.")
    ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=str(spec_path)).execute({})
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=str(spec_path)).execute({})
    env = {**os.environ, "KFERRY_CLUSTER_CONFIGS": encode_cluster_configs(
        kafka_cluster(SOURCE_CONN).client_config, kafka_cluster(DESTINATION_CONN).client_config)}
    cmd = [sys.executable, "-c", MEASURE, sys.executable, str(REPO / "spark_jobs" / "copy_batch.py"),
           "--plan", plan["plan_path"], "--in-process"]
    started = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    copy_s = time.monotonic() - started
    if done.returncode:
        raise RuntimeError(f"copy failed:\n{done.stderr[-3000:]}")
    copied = end_offsets(tb.DESTINATION.bootstrap, f"ferrymem.{topic}", partitions)
    if copied != records:
        raise RuntimeError(f"copied {copied} of {records}")
    peak_kb = int(done.stdout.strip().splitlines()[-1])
    return {"records": records, "seed_s": round(seed_s, 1), "copy_s": round(copy_s, 1),
            "peak_rss_mb": round(peak_kb / 1024, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=1_000_000)
    parser.add_argument("--large", type=int, default=10_000_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=12)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kferry-mem-"))
    os.environ["KFERRY_WORK_DIR"] = str(work)
    setup_connections("local[1]")
    small = copy_peak_rss(work, args.small, args.partitions, args.record_bytes)
    large = copy_peak_rss(work, args.large, args.partitions, args.record_bytes)
    print(json.dumps({"record_bytes": args.record_bytes, "partitions": args.partitions, "small": small,
                      "large": large, "peak_rss_ratio_large_to_small":
                      round(large["peak_rss_mb"] / small["peak_rss_mb"], 3),
                      "self_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)},
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
