"""A tenant the size of a real one: many topics, partitions and groups, every phase timed at two sizes side by side.

    .venv/bin/python bench/fleet.py [--scale full|small] [--no-spark-submit] [--no-connect] [--shared] [--profile DIR]

``full``: 20 topics x 10 partitions with 20 groups, then 200 x 10 with 200 groups (2,000 partitions); ``small``
(a smoke run): 5 x 4 with 5 groups, then 20 x 4 with 20 groups. Each size is one migration spec selecting all of
its topics and groups: a few records per partition (3), a few hot partitions with more (200), every group
committed somewhere in the data of two topics. Then, timed one after another: pre-flight, provisioning (topics,
groups), the plan of a batch, one catch-up batch of a few new records (one per topic) on Spark Connect and on
spark-submit (plus the same catch-up with nothing new on Connect), translation (with its commit), one poke of
each promotion sensor (the median of 5 pokes), and a full promotion (final copy on Connect, translation, commit,
reconcile, mark, its report), then the rollback plan the DAG's task adds to the report after the mark
(``rollback_plan_after_mark``: the consumers need not wait for it). The initial copy of the seeded data is not
timed. Before each phase the garbage of the ones before is collected, untimed (``Phases``). ``--profile DIR`` also
writes a cProfile of each promotion.

For each phase: seconds, cost per partition and per group, the ratio of the per-partition cost at the large size
to the small one (~1 = linear; > 1.5 grows faster than linearly), and the cluster calls the phase made in this
process (``kafka.call_count``: every AdminClient request and consumer call other than poll/consume; the Spark
engines' own calls run elsewhere and are not in it). After the promotion every group's destination offsets are
compared with its source commits (the copy keeps offsets: fresh topics, log start 0); any difference fails.

Runs on a private cluster pair (KFERRY_PRIVATE_SOURCE_PORT / KFERRY_PRIVATE_DESTINATION_PORT, data in
KFERRY_PRIVATE_RUN_DIR), started unless running and stopped by pid at the end, even on failure: never 2,000
partitions on the shared test bed (``--shared`` uses it anyway, for a small run only). Spark Connect on
KFERRY_SPARK_CONNECT_PORT, likewise. A bench, not a test: on a busy machine every figure moves.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from _common import REPO, tb
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from copy_throughput import CONNECT_CONN, SPARK_CONN, _TaskInstance, start_connect_server

SOURCE_CONN, DESTINATION_CONN = "kf_fleet_source", "kf_fleet_destination"
SIZES = {"full": [(20, 10, 20), (200, 10, 200)], "small": [(5, 4, 5), (20, 4, 20)]}  # topics, partitions, groups
RECORDS, HOT_RECORDS, HOT_PARTITIONS = 3, 200, 5
QUIESCE_WINDOW_S = 1
POKES = 5  # each sensor phase: the median of this many pokes


def clusters(shared: bool):
    """(source, destination) cluster specs and the ones started here (to stop)."""
    if shared:
        return tb.SOURCE, tb.DESTINATION, []
    run_dir = Path(os.environ.get("KFERRY_PRIVATE_RUN_DIR", REPO / ".testbed" / "private"))
    specs = tb.private_clusters(run_dir, int(os.environ.get("KFERRY_PRIVATE_SOURCE_PORT", 21092)),
                                int(os.environ.get("KFERRY_PRIVATE_DESTINATION_PORT", 22092)))
    started = []
    try:
        for spec in specs:
            if tb._running_pid(spec) is None:
                tb.start(spec)
                started.append(spec)
        for spec in specs:
            tb.wait_ready(spec, 300)
    except BaseException:
        for spec in started:
            tb.stop(spec)
        raise
    return specs[0], specs[1], started


def connections(source: str, destination: str) -> None:
    for conn, bootstrap in ((SOURCE_CONN, source), (DESTINATION_CONN, destination)):
        os.environ[f"AIRFLOW_CONN_{conn.upper()}"] = json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}})
    os.environ[f"AIRFLOW_CONN_{SPARK_CONN.upper()}"] = json.dumps({"conn_type": "spark", "host": "local[2]"})
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


class Tenant:
    """One size's topics, records and group commits on the source, and its spec."""

    def __init__(self, work: Path, source: str, topics: int, partitions: int, groups: int) -> None:
        self.name = f"fleet-{uuid.uuid4().hex[:6]}"
        self.source = source
        self.partitions, self.group_count = partitions, groups
        self.topics = [f"{self.name}.t{i:03d}" for i in range(topics)]
        self.groups = [f"{self.name}-g{i:03d}" for i in range(groups)]
        self.spec_path = work / f"{self.name}.yaml"
        self.spec_path.write_text(yaml.safe_dump({
            "name": self.name, "tenant": "bench",
            "source": {"connection_id": SOURCE_CONN, "alias": "src"},
            "destination": {"connection_id": DESTINATION_CONN, "alias": f"fleet-{self.name}"},
            "topics": {"include": [f"{self.name}\\..*"]}, "groups": {"include": [f"{self.name}-g.*"]},
            "copy": {"spark_connection_id": CONNECT_CONN},
            "promotion": {"quiesce_window_seconds": QUIESCE_WINDOW_S}}))

    @property
    def size(self) -> int:
        return len(self.topics) * self.partitions

    def create(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.source})
        for future in admin.create_topics([NewTopic(t, self.partitions, 1) for t in self.topics]).values():
            future.result(120)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            listed = admin.list_topics(timeout=30).topics
            if all(t in listed and len(listed[t].partitions) == self.partitions
                   and all(p.leader >= 0 for p in listed[t].partitions.values()) for t in self.topics):
                return
            time.sleep(0.5)
        raise TimeoutError(f"{self.name}: topics not in metadata with leaders")

    def produce(self, per_partition: int, hot: int = 0, only_partition_0: bool = False) -> None:
        producer = Producer({"bootstrap.servers": self.source, "linger.ms": 10})
        for i, topic in enumerate(self.topics):
            for p in (0,) if only_partition_0 else range(self.partitions):
                count = hot if (hot and p == 0 and i < HOT_PARTITIONS) else per_partition
                for r in range(count):
                    producer.produce(topic, key=f"k{r}".encode(), value=b"v" * 100, partition=p)
            producer.poll(0)
        if producer.flush(120):
            raise RuntimeError("records not acknowledged")

    def commit_groups(self) -> dict[str, dict[tuple[str, int], int]]:
        """Each group commits on every partition of two topics, somewhere in the data; returns the commits."""
        rng, ends = random.Random(len(self.topics)), self.end_offsets()
        commits = {}
        for i, group in enumerate(self.groups):
            topics = {self.topics[i % len(self.topics)], self.topics[(i + 1) % len(self.topics)]}
            commits[group] = {(t, p): rng.randint(0, ends[(t, p)]) for t in sorted(topics)
                              for p in range(self.partitions)}
            consumer = Consumer({"bootstrap.servers": self.source, "group.id": group})
            consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in commits[group].items()],
                            asynchronous=False)
            consumer.close()
        return commits

    def end_offsets(self) -> dict[tuple[str, int], int]:
        consumer = Consumer({"bootstrap.servers": self.source, "group.id": "fleet-watermarks"})
        try:
            return {(t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=30)[1]
                    for t in self.topics for p in range(self.partitions)}
        finally:
            consumer.close()


def spec_rename(tenant: Tenant, topic: str) -> str:
    from kafka_ferry.core.specs.spec import load_spec

    return load_spec(tenant.spec_path).topics.rename.destination_topic(topic)


def mirrors_led(bootstrap: str, topics: list[str], partitions: int, timeout_s: float = 120) -> None:
    """Waits (not timed) until every mirror partition has a leader: on a busy machine 2,000 fresh partitions took
    longer than the first copy's retries ("Not leader for partition")."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listed = admin.list_topics(timeout=30).topics
        if all(t in listed and len(listed[t].partitions) == partitions
               and all(p.leader >= 0 and not p.error for p in listed[t].partitions.values()) for t in topics):
            return
        time.sleep(0.5)
    raise TimeoutError("mirror topics without leaders")


def committed(bootstrap: str, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
    """Every group's committed offsets, read with a plain AdminClient (not counted, not kafka-ferry's code)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out = {}
    for group in groups:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(60)
        out[group] = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}
    return out


class Phases:
    """Times each phase and counts its cluster calls.

    Before each timed phase the garbage left by the ones before is collected (not timed): this one process holds
    both tenants and every phase, and a full collection of its heap (~0.25 s at 2,000 partitions) would otherwise
    land in whichever phase happens to cross the threshold (a task runs in a process of its own)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}

    def run(self, phase: str, fn):
        from kafka_ferry.kafka import call_count

        gc.collect()
        before = call_count.snapshot()
        started = time.monotonic()
        result = fn()
        seconds = time.monotonic() - started
        calls = call_count.since(before)
        self.rows[phase] = {"seconds": round(seconds, 3), "calls": sum(calls.values()), "by_call": calls}
        print(f"  {phase}: {seconds:.2f} s, {sum(calls.values())} calls", file=sys.stderr, flush=True)
        return result

    def pokes(self, phase: str, fn, times: int = POKES):
        """A sensor's poke, ``times`` over as a sensor pokes: the median is the phase's time (one poke of a few
        hundredths of a second is within the machine's noise), with the fastest and slowest, and one poke's calls."""
        took = []
        for _ in range(times):
            self.run(phase, fn)
            took.append(self.rows[phase]["seconds"])
        self.rows[phase].update(seconds=statistics.median(took), min_s=min(took), max_s=max(took), pokes=times)


def measure(tenant: Tenant, destination: str, args) -> dict:
    from airflow.exceptions import AirflowSkipException

    from kafka_ferry.core.specs.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.operators.copy import CopyBatchSparkOperator, CopyReportOperator, PlanCopyBatchOperator
    from kafka_ferry.operators.provision import (
        MigrationPreflightOperator,
        ProvisionMirrorGroupsOperator,
        ProvisionMirrorTopicsOperator,
    )
    from kafka_ferry.operators.translation import TranslateOffsetsOperator
    from kafka_ferry.promotion import readiness
    from kafka_ferry.promotion.steps import PromotionRunner, spark_connect_final_copy
    from kafka_ferry.state.store import MigrationStateStore

    path = str(tenant.spec_path)
    tenant.create()
    tenant.produce(RECORDS, hot=HOT_RECORDS)
    source_commits = tenant.commit_groups()
    phases = Phases()

    def catch_up(conn: str) -> dict:
        plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=path).execute({})
        context = {"ti": _TaskInstance({"plan_copy": plan})}
        try:
            CopyBatchSparkOperator(task_id="copy_batch", spec_path=path, conn_id=conn).execute(context)
        except AirflowSkipException:
            pass
        CopyReportOperator(task_id="copy_report", spec_path=path).execute(context)
        return plan

    phases.run("preflight", lambda: MigrationPreflightOperator(task_id="preflight", spec_path=path).execute({}))
    phases.run("provision_topics",
               lambda: ProvisionMirrorTopicsOperator(task_id="provision_topics", spec_path=path).execute({}))
    phases.run("provision_groups",
               lambda: ProvisionMirrorGroupsOperator(task_id="provision_groups", spec_path=path).execute({}))
    phases.run("plan", lambda: PlanCopyBatchOperator(task_id="plan_copy", spec_path=path, dry_run=True).execute({}))
    mirrors_led(destination, [spec_rename(tenant, t) for t in tenant.topics], tenant.partitions)
    for attempt in range(3):  # the seeded data: not timed
        try:
            catch_up(CONNECT_CONN if args.connect else SPARK_CONN)
            break
        except Exception as exc:  # noqa: BLE001 - a busy broker's "Not leader for partition" on fresh mirrors
            if attempt == 2:
                raise
            print(f"  the initial copy failed ({str(exc)[:200]}): again in 10 s", file=sys.stderr, flush=True)
            time.sleep(10)
    if args.connect:
        tenant.produce(1, only_partition_0=True)
        phases.run("catch_up_connect", lambda: catch_up(CONNECT_CONN))
        phases.run("catch_up_connect_nothing_new", lambda: catch_up(CONNECT_CONN))
    if args.spark_submit:
        tenant.produce(1, only_partition_0=True)
        phases.run("catch_up_spark_submit", lambda: catch_up(SPARK_CONN))
    plan = catch_up(CONNECT_CONN if args.connect else SPARK_CONN)  # nothing new: the plan the translation reads
    phases.run("translation", lambda: TranslateOffsetsOperator(
        task_id="translate", spec_path=path, commit_offsets=True).execute({"ti": _TaskInstance({"plan_copy": plan})}))

    spec = load_spec(tenant.spec_path)
    source, dest = kafka_cluster(SOURCE_CONN), kafka_cluster(DESTINATION_CONN)
    store = MigrationStateStore(dest, spec.state_topic_name)
    readiness.check_quiesced_persistent(source, store, tenant.topics, QUIESCE_WINDOW_S)  # the first mark
    time.sleep(QUIESCE_WINDOW_S + 0.2)  # the window passes (not timed)

    def sensors() -> None:
        results = [readiness.check_replication_lag(source, store, tenant.topics, 0),
                   readiness.check_quiesced_persistent(source, store, tenant.topics, QUIESCE_WINDOW_S),
                   readiness.check_groups_inactive(source, tenant.groups)]
        if not all(ready for ready, _ in results):
            raise RuntimeError(f"a sensor is not ready: {[d for _, d in results]}")

    phases.pokes("sensors_one_poke", sensors)
    if args.profile:  # one more poke, profiled apart (not timed)
        import cProfile

        cProfile.runctx("sensors()", globals(), {"sensors": sensors},
                        str(Path(args.profile) / f"sensors-{tenant.size}.pstats"))
    final_copy = None
    if args.connect:
        import spark_connect
        from kafka_ferry.copy.packaging import build_package_zip

        final_copy = spark_connect_final_copy(spark_connect.URL, build_package_zip(Path(tempfile.mkdtemp())))
    from kafka_ferry.kafka import call_count

    step_calls, mark = {}, [call_count.snapshot()]

    def after_step(step: str) -> None:  # each step's own calls (the first one's include the runner's start)
        step_calls[step], mark[0] = call_count.since(mark[0]), call_count.snapshot()

    runner = PromotionRunner(spec, source, dest, store, final_copy=final_copy, after_step=after_step)

    def promote() -> dict:
        if not args.profile:
            return runner.run(rollback_plan=False)
        import cProfile

        profile = cProfile.Profile()
        try:
            return profile.runcall(runner.run, rollback_plan=False)
        finally:
            out = Path(args.profile) / f"promotion-{tenant.size}.pstats"
            profile.dump_stats(out)
            print(f"  profile of the promotion: {out}", file=sys.stderr, flush=True)

    report = phases.run("promotion", promote)
    if report["status"] != "promoted":
        raise RuntimeError(f"promotion status {report['status']}")
    for step, timing in report["this_run"].items():
        calls = step_calls.get(step, {})
        phases.rows[f"  promotion.{step}"] = {"seconds": timing.get("duration_s") or 0.0,
                                              "calls": sum(calls.values()), "by_call": calls}
    total = phases.rows["promotion"]
    steps_s = sum(r["seconds"] for k, r in phases.rows.items() if k.startswith("  promotion."))
    rest = {k: v - sum(c.get(k, 0) for c in step_calls.values()) for k, v in total["by_call"].items()}
    rest = {k: v for k, v in rest.items() if v}
    phases.rows["  promotion.report"] = {"seconds": round(max(0.0, total["seconds"] - steps_s), 3),
                                         "calls": sum(rest.values()), "by_call": rest}
    # as the DAG's task does it: after the mark (the consumers need not wait for it), before the run's page
    report = phases.run("rollback_plan_after_mark", lambda: runner.add_rollback_plan(report))
    if "error" in report["rollback_plan"]:
        raise RuntimeError(report["rollback_plan"]["error"])
    phases.pokes("sensor_offsets_synced", lambda: readiness.check_group_offsets_synced(dest, store))

    after = committed(destination, tenant.groups)
    wrong = {g: {f"{t}-{p}": (o, after[g].get((t, p))) for (t, p), o in want.items() if after[g].get((t, p)) != o}
             for g, want in source_commits.items()}
    wrong = {g: w for g, w in wrong.items() if w}
    if wrong:
        raise RuntimeError(f"{len(wrong)} of {len(tenant.groups)} groups not exact after promotion, first: "
                           f"{next(iter(wrong.items()))}")
    return {"topics": len(tenant.topics), "partitions": tenant.size, "groups": tenant.group_count,
            "groups_exact": len(tenant.groups), "phases": phases.rows}


def table(results: list[dict]) -> str:
    small, large = results[0], results[-1]
    header = (f"{'phase':30} {'s@' + str(small['partitions']):>9} {'s@' + str(large['partitions']):>9} "
              f"{'ms/part':>8} {'ms/part':>8} {'ms/grp':>8} {'ms/grp':>8} {'ratio':>6} "
              f"{'calls':>6} {'calls':>6}")
    lines = [header, "-" * len(header)]
    for phase, row in large["phases"].items():
        a = small["phases"].get(phase)
        if a is None:
            continue
        per_a, per_b = a["seconds"] * 1e3 / small["partitions"], row["seconds"] * 1e3 / large["partitions"]
        grp_a, grp_b = a["seconds"] * 1e3 / small["groups"], row["seconds"] * 1e3 / large["groups"]
        ratio = per_b / per_a if per_a else float("nan")
        lines.append(f"{phase:30} {a['seconds']:9.2f} {row['seconds']:9.2f} {per_a:8.2f} {per_b:8.2f} "
                     f"{grp_a:8.1f} {grp_b:8.1f} {ratio:6.2f} {a['calls']:6d} {row['calls']:6d}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=sorted(SIZES), default="full")
    parser.add_argument("--no-connect", dest="connect", action="store_false", help="skip the Spark Connect engine")
    parser.add_argument("--no-spark-submit", dest="spark_submit", action="store_false")
    parser.add_argument("--profile", metavar="DIR", help="also write a cProfile of each size's promotion and "
                        "sensors' poke (promotion-<partitions>.pstats) to DIR")
    parser.add_argument("--shared", action="store_true", help="the shared test bed instead of a private pair "
                        "(small runs only)")
    args = parser.parse_args()
    if args.shared and args.scale == "full":
        parser.error("--shared is for --scale small only: never 2,000 partitions on the shared test bed")
    work = Path(tempfile.mkdtemp(prefix="kferry-fleet-"))
    os.environ["KFERRY_WORK_DIR"] = str(work)
    source, destination, started = clusters(args.shared)
    stop_connect = None
    try:
        connections(source.bootstrap, destination.bootstrap)
        if args.connect:
            import spark_connect

            _, started_here = start_connect_server("local[2]")
            stop_connect = spark_connect.down if started_here else None
        results = []
        for topics, partitions, groups in SIZES[args.scale]:
            print(f"{topics} topics x {partitions} partitions, {groups} groups", file=sys.stderr, flush=True)
            results.append(measure(Tenant(work, source.bootstrap, topics, partitions, groups),
                                   destination.bootstrap, args))
        print(json.dumps(results, indent=1))
        print(table(results))
        return 0
    finally:
        if stop_connect:
            stop_connect()
        for spec in started:
            tb.stop(spec)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
