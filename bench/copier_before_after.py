"""The copier before and after a change, side by side in one run, on one seeded topic.

    .venv/bin/python bench/copier_before_after.py --before <checkout> [--after <checkout>] [--rounds 3]
                                                  [--records 300000] [--partitions 12] [--record-bytes 1024]

A refactor of the hot loop must not cost throughput, and this machine's noise is larger than the effect being
looked for, so the two versions are run alternately (before, after, before, after, ...) against the same source
topic, each in its own process (`bench/copy_inprocess.py` with PYTHONPATH at that checkout's `plugins`), each
round also timing the raw confluent-kafka loop in the same process as the yardstick. The page cache is written
out and the machine left idle before every copy (`_common.settle`). Prints, per version, the median records/s,
the median CPU microseconds per record and the median ratio to the raw loop of its own round, then after/before
for each as JSON. Needs the test bed up; every topic of the run is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

from _common import REPO, create_topic, drop_topics, seed, settle, tb


def one_copy(checkout: Path, topic: str, partitions: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout / "plugins"))
    out = subprocess.run([sys.executable, str(REPO / "bench" / "copy_inprocess.py"), "--topic", topic,
                          "--partitions", str(partitions)], env=env, check=True, capture_output=True, text=True)
    # copy_inprocess prints one JSON document last; the library may log before it.
    return json.loads(out.stdout[out.stdout.index("{\n"):])


def summary(rounds: list[dict]) -> dict:
    return {"records_per_s": round(statistics.median(r["kafka_ferry_in_process"]["records_per_s"] for r in rounds)),
            "us_cpu_per_record": statistics.median(r["kafka_ferry_in_process"]["us_cpu_per_record"]
                                                   for r in rounds),
            "rate_vs_raw": statistics.median(r["ratio_ferry_rate_to_raw_rate"] for r in rounds),
            "each_records_per_s": [r["kafka_ferry_in_process"]["records_per_s"] for r in rounds]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the code before the change")
    parser.add_argument("--after", type=Path, default=REPO, help="a checkout after it (default: this one)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--record-bytes", type=int, default=1024)
    args = parser.parse_args()
    for checkout in (args.before, args.after):
        if not (checkout / "plugins" / "kafka_ferry" / "copy").is_dir():
            parser.error(f"{checkout} is not a kafka-ferry checkout (no plugins/kafka_ferry/copy)")
    run = f"ab-{uuid.uuid4().hex[:6]}"
    topic = f"bench.{run}.src"
    try:
        create_topic(tb.SOURCE.bootstrap, topic, args.partitions)
        seed(topic, args.partitions, args.records, args.record_bytes)
        results: dict[str, list[dict]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            for label, checkout in (("before", args.before), ("after", args.after)):
                settle()
                results[label].append(one_copy(checkout, topic, args.partitions))
        before, after = summary(results["before"]), summary(results["after"])
        print(json.dumps({"records": args.records, "record_bytes": args.record_bytes, "rounds": args.rounds,
                          "before": before, "after": after,
                          "after_over_before_rate": round(after["records_per_s"] / before["records_per_s"], 3),
                          "after_over_before_cpu": round(after["us_cpu_per_record"] / before["us_cpu_per_record"], 3),
                          "after_over_before_rate_vs_raw": round(after["rate_vs_raw"] / before["rate_vs_raw"], 3)},
                         indent=1))
    finally:
        drop_topics(run)
        drop_topics("inproc-")
    return 0


if __name__ == "__main__":
    sys.exit(main())
