"""The copy lease on the real destination: one copy job per migration, a crashed holder does not block.

Copy jobs here are ``spark_jobs/copy_batch.py`` processes (the job Airflow's copy task runs, started by hand
as an operator outside Airflow would); the claims race on the real state topic.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from scenarios import REPO, assert_copied_exactly_once, plan_and_copy_in_process, provision, write_spec

from kafka_ferry.copy.lease import CopyLease, CopyLeaseLost, process_started
from kafka_ferry.core.batches.copy_lease import Claim, CopyLeaseHeld
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.operators.copy import PlanCopyBatchOperator

pytestmark = [pytest.mark.integration]

LEASE_HELD_EXIT = 3


def _state_topic(clusters, tmp_path, prefix: str) -> tuple[str, str]:
    spec_path = write_spec(tmp_path, clusters, prefix)
    provision(spec_path)  # creates the state topic
    return spec_path, load_spec(spec_path).state_topic_name


def _lease(cluster_configs, state_topic: str, batch: str, **kw) -> CopyLease:
    return CopyLease(KafkaCluster("destination", cluster_configs["destination"]), state_topic, "m", batch, **kw)


def test_claims_racing_on_the_state_topic_leave_exactly_one_holder(clusters, tmp_path, work_dir, cluster_configs):
    _, state_topic = _state_topic(clusters, tmp_path, clusters.unique("leaserace"))
    leases = [_lease(cluster_configs, state_topic, f"b{i}") for i in range(6)]
    start = threading.Barrier(len(leases))
    outcomes: dict[int, object] = {}

    def claim(i: int) -> None:
        start.wait()
        try:
            outcomes[i] = leases[i].acquire()
        except CopyLeaseHeld as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(leases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    winners = [i for i, o in outcomes.items() if isinstance(o, Claim)]
    assert len(outcomes) == len(leases) and len(winners) == 1, outcomes
    winner = leases[winners[0]].claim
    for i, outcome in outcomes.items():
        if i != winners[0]:
            assert f"(batch {winner.batch_id}, lease {winner.token[:8]}" in str(outcome), outcome
            assert "another copy is running" in str(outcome)

    leases[winners[0]].release()  # the holder withdraws: the next claimant holds at once
    with _lease(cluster_configs, state_topic, "after") as nxt:
        assert nxt.claim.claim_offset is not None


def _write_foreign(cluster_configs, state_topic: str, claim: Claim) -> None:
    lease = _lease(cluster_configs, state_topic, claim.batch_id)
    lease.claim = claim
    lease._write(claim)


def test_a_dead_or_expired_holder_does_not_block_and_a_live_remote_one_does(clusters, tmp_path, work_dir,
                                                                            cluster_configs):
    _, state_topic = _state_topic(clusters, tmp_path, clusters.unique("leasedead"))
    now = int(time.time() * 1000)
    gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    started = process_started(gone.pid)
    gone.send_signal(signal.SIGKILL)
    gone.wait()
    # A holder on this host whose process is gone (killed -9, lease not expired): taken over at once.
    _write_foreign(cluster_configs, state_topic, Claim("dead" * 8, "m", "b-dead", socket.gethostname(), gone.pid,
                                                         started or "", now, now + 3_600_000))
    with _lease(cluster_configs, state_topic, "b-after-dead"):
        pass
    # A holder elsewhere whose lease expired (crashed without withdrawing): taken over.
    _write_foreign(cluster_configs, state_topic, Claim("exp" * 8, "m", "b-exp", "other-host", 1, "1", now - 60_000,
                                                         now - 1))
    with _lease(cluster_configs, state_topic, "b-after-expired"):
        pass
    # A live holder elsewhere: refused, naming it.
    _write_foreign(cluster_configs, state_topic, Claim("live" * 8, "m", "b-live", "worker-7", 4242, "1", now,
                                                         now + 3_600_000))
    with pytest.raises(CopyLeaseHeld, match=r"copy job worker-7/pid 4242 \(batch b-live, lease livelive,"):
        _lease(cluster_configs, state_topic, "b-refused").acquire()


def test_a_lease_renewed_by_its_holder_outlives_its_duration_and_a_missed_renewal_is_final(
        clusters, tmp_path, work_dir, cluster_configs):
    _, state_topic = _state_topic(clusters, tmp_path, clusters.unique("leaserenew"))
    with _lease(cluster_configs, state_topic, "b-long", lease_s=5.0, renew_every_s=0.2) as held:
        first_expiry = held.claim.expires_at_ms
        while int(time.time() * 1000) < first_expiry + 500:  # past the first claim's expiry: held by renewals
            time.sleep(0.2)
        assert held.claim.expires_at_ms > first_expiry and not held.lost
        with pytest.raises(CopyLeaseHeld, match="batch b-long"):
            _lease(cluster_configs, state_topic, "b-second").acquire()
    stalled = _lease(cluster_configs, state_topic, "b-stalled", lease_s=5.0, renew_every_s=3600)
    stalled.acquire()
    while int(time.time() * 1000) < stalled.claim.expires_at_ms:
        time.sleep(0.1)
    assert stalled.renew() is False and stalled.lost  # never renewed once expired: a later claim may hold it
    with _lease(cluster_configs, state_topic, "b-next"):
        pass
    stalled.release()
    # A batch that outlived its lease unrenewed does not report success: another job may have copied meanwhile.
    with pytest.raises(CopyLeaseLost, match="batch b-overrun expired before it could be renewed"), _lease(
            cluster_configs, state_topic, "b-overrun", lease_s=5.0, renew_every_s=3600) as overrun:
        while int(time.time() * 1000) < overrun.claim.expires_at_ms:
            time.sleep(0.1)
    assert _claims(clusters, state_topic) == {}  # withdrawn all the same


def _start_job(plan_path: str, configs_env: str, log_path, wait_for_go: bool = False) -> subprocess.Popen:
    """copy_batch.py --in-process; with ``wait_for_go`` its imports are done before it reads a line, then it runs."""
    env = {**os.environ, "KFERRY_CLUSTER_CONFIGS": configs_env}
    env.pop("KFERRY_FAULT", None)
    args = ["--plan", plan_path, "--in-process"]
    if wait_for_go:
        cmd = [sys.executable, "-c", PRIMED_JOB, str(REPO / "spark_jobs"), *args]
    else:
        cmd = [sys.executable, str(REPO / "spark_jobs" / "copy_batch.py"), *args]
    with open(log_path, "wb") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                stdin=subprocess.PIPE if wait_for_go else None)


# The copy job, started and imported ahead, run when a line arrives: its claim then lands within a moment.
PRIMED_JOB = """
import sys
sys.path.insert(0, sys.argv[1])
import copy_batch
sys.stdin.readline()
sys.exit(copy_batch.main(sys.argv[2:]))
"""


def _landed(clusters, topic: str, partitions: int) -> int:
    ends = clusters.cluster("destination").list_offsets([(topic, p) for p in range(partitions)], read_committed=False)
    return sum(ends.values())


def _claims(clusters, state_topic: str) -> dict:
    from kafka_ferry.core.common.state_records import LEASE_KIND
    from kafka_ferry.state.store import MigrationStateStore

    return MigrationStateStore(clusters.cluster("destination"), state_topic).read_kind(LEASE_KIND)


def test_a_second_copy_job_of_the_same_plan_is_refused_naming_the_first_and_the_copy_is_exact(
        clusters, tmp_path, work_dir, configs_env):
    partitions, per_partition = 4, 150_000
    p = clusters.unique("lease")
    topic = clusters.create_topic("source", f"{p}.t", partitions)
    producer = clusters.producer("source", **{"linger.ms": 50, "queue.buffering.max.messages": 1_000_000})
    for part in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, key=f"k{i}".encode(), value=f"{part}:{i}".encode().ljust(100, b"x"),
                             partition=part)
        producer.flush(60)
    spec_path, state_topic = _state_topic(clusters, tmp_path, p)
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})
    jobs: list[subprocess.Popen] = []
    try:
        second = _start_job(plan["plan_path"], configs_env, tmp_path / "second.log", wait_for_go=True)
        first = _start_job(plan["plan_path"], configs_env, tmp_path / "first.log")
        jobs += [second, first]
        while not _claims(clusters, state_topic):  # the first job has claimed the lease
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            time.sleep(0.02)
        assert second.stdin is not None  # started with a pipe: it waits for the go
        second.stdin.write(b"go\n")
        second.stdin.close()
        assert second.wait(120) == LEASE_HELD_EXIT, (tmp_path / "second.log").read_text()[-3000:]
        refused_while_copying = first.poll() is None
        assert first.wait(600) == 0, (tmp_path / "first.log").read_text()[-3000:]
    finally:
        for job in jobs:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait(30)
    refused = (tmp_path / "second.log").read_text()
    assert f"another copy is running: copy job {socket.gethostname()}/pid {first.pid} (batch " \
           f"{plan['batch_id']}" in refused, refused[-3000:]
    assert "copied lease" not in refused  # the refused job touched no partition
    assert _claims(clusters, state_topic) == {}  # both withdrew their claims

    for _ in range(3):  # the rest of the topic beyond the batch cap, then an empty batch
        if plan_and_copy_in_process(spec_path, configs_env)["partitions_planned"] == 0:
            break
    else:
        raise AssertionError("not caught up after 3 more batches")
    source_id = clusters.cluster("source").describe_cluster().cluster_id
    pairs = assert_copied_exactly_once(clusters, topic, topic, partitions, source_id)  # 0 lost, 0 duplicated
    assert sum(len(v) for v in pairs.values()) == partitions * per_partition
    print(f"COPY-LEASE: second job refused {'while the first copied' if refused_while_copying else ''}; "
          f"{partitions * per_partition} records checked, 0 lost, 0 duplicated")


def test_the_promotions_final_copy_takes_the_same_lease(clusters, tmp_path, work_dir, cluster_configs):
    from scenarios import seed_plain

    from kafka_ferry.promotion.steps import in_process_final_copy
    from kafka_ferry.state.store import MigrationStateStore

    p = clusters.unique("leasefinal")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, 50)
    spec_path, state_topic = _state_topic(clusters, tmp_path, p)
    spec = load_spec(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, state_topic)
    with _lease(cluster_configs, state_topic, "b-catch-up") as held, pytest.raises(
            CopyLeaseHeld, match=f"batch b-catch-up, lease {held.claim.token[:8]}"):
        in_process_final_copy(spec, source, destination, store)
    assert _landed(clusters, topic, 2) == 0  # refused before any record moved
    assert in_process_final_copy(spec, source, destination, store)["records_copied"] == 100
    assert _claims(clusters, state_topic) == {}
