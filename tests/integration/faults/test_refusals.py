"""Refusals that must fail clearly and change nothing they should not: a topic deleted between plan and copy,
a record the destination rejects, wrong credentials, an unreachable bootstrap."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fault_support import configs_env, count_exact, progress_of, seed_volume, start_copy_job
from scenarios import provision, write_spec

from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.operators.copy import PlanCopyBatchOperator

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def run_job(plan_path: str, env: str, log) -> tuple[int, str]:
    job = start_copy_job(plan_path, env, log)
    rc = job.wait(300)
    return rc, "\n".join(line for line in log.read_text().splitlines() if not line.startswith("%"))


@pytest.mark.parametrize("side", ["source", "destination"])
def test_topic_deleted_between_plan_and_copy_fails_and_writes_nothing(private, tmp_path, work_dir, side):
    p = private.unique(f"del-{side[:3]}")
    kept = private.create_topic("source", f"{p}.kept", 2)
    doomed = private.create_topic("source", f"{p}.doomed", 2)
    for t in (kept, doomed):
        seed_volume(private, t, 2, 500)
    spec_path = write_spec(tmp_path, private, p)
    provision(spec_path)
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})
    private.admin(side).delete_topics([doomed])[doomed].result(30)
    deadline = time.monotonic() + 30
    while doomed in private.cluster(side).list_topic_names() and time.monotonic() < deadline:
        time.sleep(0.2)

    rc, output = run_job(plan["plan_path"], configs_env(private), tmp_path / "job.log")

    assert rc != 0
    assert f"planned partitions no longer exist: {side} {doomed}-0, {side} {doomed}-1" in output, output[-3000:]
    destination = private.cluster("destination")
    ends = destination.list_offsets([(kept, 0), (kept, 1)], read_committed=False)
    assert ends == {(kept, 0): 0, (kept, 1): 0}  # nothing written elsewhere
    if side == "destination":
        assert doomed not in destination.list_topic_names()  # not re-created by a produce
    assert progress_of(private, load_spec(spec_path).state_topic_name) == {}
    print(f"FAULT-MATRIX {side} topic deleted between plan and copy: exit {rc}, nothing written; message: "
          + next(line for line in output.splitlines() if "no longer exist" in line)[-300:])


def test_destination_rejecting_a_record_fails_naming_it_and_keeps_progress_before_it(private, tmp_path, work_dir):
    p = private.unique("reject")
    topic = private.create_topic("source", f"{p}.t", 1)
    big_at = 1500  # 800 KB: above the destination's 600 KB, below the clients' 1 MB message.max.bytes
    producer = private.producer("source")
    for i in range(3000):
        value = b"B" * 800_000 if i == big_at else f"v{i}".encode().ljust(100, b".")
        producer.produce(topic, key=f"k{i}".encode(), value=value, partition=0)
    assert producer.flush(30) == 0
    spec_path = write_spec(tmp_path, private, p)
    provision(spec_path)
    private.cluster("destination").set_topic_configs(topic, {"max.message.bytes": "600000"})
    plan = PlanCopyBatchOperator(task_id="plan_copy", spec_path=spec_path).execute({})

    rc, output = run_job(plan["plan_path"], configs_env(private), tmp_path / "job.log")

    assert rc != 0
    line = next((x for x in output.splitlines() if f"copy {topic}-0 to {topic}-0 at source offsets" in x), None)
    assert line is not None, output[-3000:]
    named = int(line.split("at source offsets ")[1].split(".")[0])
    assert named <= big_at and "too large" in line.lower(), line
    assert f"the largest record not copied is {topic}-0 at source offset {big_at} (800005 bytes" in line, line
    progress = progress_of(private, load_spec(spec_path).state_topic_name)
    assert all(v["next_upstream_offset"] <= named for v in progress.values()), progress
    destination_records = private.cluster("destination").list_offsets([(topic, 0)], read_committed=False)[(topic, 0)]
    assert destination_records <= big_at
    print(f"FAULT-MATRIX destination rejects record {topic}-0@{big_at} (800 KB > max.message.bytes 600000): exit {rc}, "
          f"{destination_records} records before it on the destination, progress "
          f"{[v['next_upstream_offset'] for v in progress.values()]}; message: {line[-400:]}")

    private.cluster("destination").set_topic_configs(topic, {"max.message.bytes": "1048588"})  # the operator's fix
    retry_rc, output = run_job(plan["plan_path"], configs_env(private), tmp_path / "retry.log")
    assert retry_rc == 0, output[-3000:]
    source_id = private.cluster("source").describe_cluster().cluster_id
    figures = count_exact(private, topic, topic, 1, source_id)
    assert (figures.checked, figures.lost, figures.duplicated, figures.mismatched) == (3000, 0, 0, 0)
    print(figures.line("destination rejecting a record, retried after raising max.message.bytes"))


@pytest.mark.timeout(240)  # a hang fails here; the figures print how long each refusal took
@pytest.mark.parametrize("case", ["wrong-password", "unreachable"])
def test_wrong_credentials_and_unreachable_bootstrap_fail_clearly(private, tmp_path, work_dir, case):
    from kafka_ferry.operators.provision import ProvisionMirrorTopicsOperator
    from kafka_ferry.sensors.promotion_sensors import ReplicationLagSensor

    p = private.unique("badconn")
    private.create_topic("source", f"{p}.t", 1)
    user, password = private.create_principal("source", "mig-src")
    conn = f"kf_bad_{case.replace('-', '_')}"
    if case == "wrong-password":
        private.set_connection(conn, private.sasl_config("source", user, password + "-wrong"))
        expected = "authentication failed"
    else:
        private.set_connection(conn, {"bootstrap.servers": "127.0.0.1:39999"})  # nothing listens there
        expected = "check bootstrap.servers"
    spec_path = write_spec(tmp_path, private, p)
    spec_text = Path(spec_path).read_text().replace(private.SOURCE_CONN, conn)
    Path(spec_path).write_text(spec_text)

    timings = {}
    for name, call in (
        ("provision operator", lambda: ProvisionMirrorTopicsOperator(task_id="t", spec_path=spec_path).execute({})),
        ("lag sensor poke", lambda: ReplicationLagSensor(task_id="s", spec_path=spec_path, deferrable=False)
         .poke({})),
    ):
        started = time.monotonic()
        with pytest.raises(Exception) as failure:  # noqa: PT011 - the message is what is asserted
            call()
        timings[name] = round(time.monotonic() - started, 1)
        assert expected in str(failure.value), f"{name}: {failure.value}"
        assert password not in str(failure.value)
    print(f"FAULT-MATRIX {case}: failed clearly in {timings} (request timeout 30 s); message: {failure.value}")
