"""Scale of the pure paths: planning, translation, promotion decisions and reconciliation at 1k and 10k partitions.

Synthetic inputs: N partitions over N/50 topics, G groups each committed on one topic's partitions, offset
syncs per partition as the copier emits them every ``--sync-interval`` records. Reconciliation reads through
an in-memory fake cluster (``scale_fake.py``); nothing here talks to Kafka unless ``--real`` is given.

Prints JSON: seconds per stage, µs per partition / per group, and the 10k/1k ratio of time per unit (~1 when
linear). ``--profile STAGE`` prints a cProfile of that stage at the largest size. A benchmark, never a test.

    python bench/scale.py                      # 1k/100 groups and 10k/1,000 groups
    python bench/scale.py --real 2000          # also time plan/translation against the test bed
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import logging
import os
import platform
import pstats
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_fake import FakeClusterHook  # noqa: E402

from kafka_ferry.core.batches.batch_planning import PartitionPosition, plan_ranges, split_into_task_groups  # noqa: E402
from kafka_ferry.core.batches.progress import PartitionProgress  # noqa: E402
from kafka_ferry.core.offsets.offset_decisions import partition_copy, translate_groups  # noqa: E402
from kafka_ferry.core.offsets.offset_sync_policy import PartitionSyncTracker  # noqa: E402
from kafka_ferry.promotion.reconcile import reconcile_copies  # noqa: E402
from kafka_ferry.state.offset_decisions import expected_group_offsets, stored_decisions  # noqa: E402

PARTITIONS_PER_TOPIC = 50
RECORDS = 5_000  # per partition, already copied (translation)
RECONCILE_RECORDS = 10  # per partition, read back on both sides (reconciliation)


def partitions(n: int) -> list[tuple[str, int]]:
    return [(f"scale.t{i // PARTITIONS_PER_TOPIC:04d}", i % PARTITIONS_PER_TOPIC) for i in range(n)]


def stage_sync_policy(tps, interval):
    out = {}
    for tp in tps:
        tracker = PartitionSyncTracker(interval)
        out[tp] = tracker.observe_run(0, 0, RECORDS) + tracker.finish()
    return out


def stage_plan(tps):
    positions = [PartitionPosition(t, p, RECORDS, 0, RECORDS + 1_000 + p) for t, p in tps]
    plan = plan_ranges(positions, max_records_per_partition=10_000)
    groups = split_into_task_groups(plan[1], 16)
    return plan, groups


def stage_copies(tps, syncs):
    copies = {}
    for t, p in tps:
        progress = PartitionProgress(t, p, t + ".dst", RECORDS, RECORDS - 1, RECORDS - 1, RECORDS)
        copies[(t, p)] = partition_copy(progress, syncs[(t, p)], 0, 0, RECORDS)
    return copies


def commits(tps, groups: int):
    topics = sorted({t for t, _ in tps})
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    out = {}
    for g in range(groups):
        topic = topics[g % len(topics)]
        out[f"scale.g{g:05d}"] = {(topic, p): ((g * 37 + p * 101) % RECORDS, "") for p in by_topic[topic]}
    return out


def stage_translate(group_commits, copies):
    return translate_groups(group_commits, copies)


def stage_promotion(decisions):
    state = {"translation/final": {"decisions": [d.as_dict() for d in decisions]}}
    return expected_group_offsets(stored_decisions(state))


def stage_reconcile(tps):
    source = FakeClusterHook({tp: RECONCILE_RECORDS for tp in tps})
    destination = FakeClusterHook({(t + ".dst", p): RECONCILE_RECORDS for t, p in tps})
    syncs = [(0, 0), (RECONCILE_RECORDS - 1, RECONCILE_RECORDS - 1)]
    copies = [partition_copy(PartitionProgress(t, p, t + ".dst", RECONCILE_RECORDS, RECONCILE_RECORDS - 1,
                                               RECONCILE_RECORDS - 1), syncs, 0, 0, RECONCILE_RECORDS)
              for t, p in tps]
    report = reconcile_copies(source, destination, copies)
    if not report.ok:
        raise SystemExit("fake reconciliation mismatched: the bench inputs are wrong")
    return source.counter["position_entries"] + destination.counter["position_entries"]


GC = {"enabled": True}


def timed(fn, *args):
    gc.collect()  # the previous stage's garbage is not this stage's cost
    if not GC["enabled"]:
        gc.disable()
    try:
        start = time.perf_counter()
        result = fn(*args)
        return time.perf_counter() - start, result
    finally:
        gc.enable()


def run(n: int, groups: int, interval: int) -> dict:
    tps = partitions(n)
    stages: dict[str, dict] = {}

    def record(name: str, seconds: float, unit: str, count: int, **extra) -> None:
        stages[name] = {"seconds": round(seconds, 4), f"us_per_{unit}": round(seconds * 1e6 / count, 2), **extra}

    s, syncs = timed(stage_sync_policy, tps, interval)
    record("sync_policy", s, "partition", n, syncs=sum(map(len, syncs.values())))
    s, _ = timed(stage_plan, tps)
    record("plan_batch_and_split", s, "partition", n)
    s, copies = timed(stage_copies, tps, syncs)
    record("offset_maps", s, "partition", n)
    group_commits = commits(tps, groups)
    s, decisions = timed(stage_translate, group_commits, copies)
    record("translate_groups", s, "group", groups, commits=len(decisions),
           us_per_commit=round(s * 1e6 / len(decisions), 2))
    s, _ = timed(stage_promotion, decisions)
    record("promotion_decisions", s, "group", groups)
    s, positions = timed(stage_reconcile, tps)
    record("reconcile_fake_cluster", s, "partition", n, position_entries=positions)
    return {"partitions": n, "groups": groups, "stages": stages}


def profile(n: int, groups: int, interval: int, stage: str) -> None:
    tps = partitions(n)
    args = {"sync_policy": (stage_sync_policy, tps, interval), "plan": (stage_plan, tps),
            "reconcile": (stage_reconcile, tps)}
    if stage not in args:
        copies = stage_copies(tps, stage_sync_policy(tps, interval))
        args["translate"] = (stage_translate, commits(tps, groups), copies)
    fn, *rest = args[stage]
    prof = cProfile.Profile()
    prof.runcall(fn, *rest)
    pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(20)


def ratios(small: dict, large: dict) -> dict:
    out = {}
    for name, figures in large["stages"].items():
        unit = next(k for k in figures if k.startswith("us_per_"))
        out[name] = round(figures[unit] / small["stages"][name][unit], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000:100,10000:1000", help="partitions:groups,...")
    parser.add_argument("--sync-interval", type=int, default=100)
    parser.add_argument("--profile", choices=["sync_policy", "plan", "translate", "reconcile"])
    parser.add_argument("--no-gc", action="store_true",
                        help="collector off inside each timed stage: its full passes over the growing live heap "
                             "make per-unit times rise with size although the code's work is linear")
    parser.add_argument("--real", type=int, metavar="PARTITIONS", help="also time against the test bed")
    args = parser.parse_args()
    logging.disable(logging.INFO)  # one line per reconciled partition would dominate the timing
    GC["enabled"] = not args.no_gc
    sizes = [tuple(map(int, s.split(":"))) for s in args.sizes.split(",")]
    if args.profile:
        profile(*sizes[-1], args.sync_interval, args.profile)
        return
    results = [run(n, g, args.sync_interval) for n, g in sizes]
    out = {"machine": {"cores": os.cpu_count(), "python": platform.python_version()},
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "gc_in_stages": GC["enabled"], "records_per_partition": RECORDS, "sync_interval": args.sync_interval,
           "runs": results}
    if len(results) >= 2:
        out["ratio_time_per_unit_largest_vs_smallest"] = ratios(results[0], results[-1])
    if args.real:
        from scale_real import run_real

        out["real"] = run_real(args.real)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
