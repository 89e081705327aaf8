"""Run Apache Kafka's real MirrorMaker 2 (dedicated mode, from connect-mirror on Maven Central) as a peer.

Benchmarks compare kafka-ferry with it on the same data. Standard library only; the classpath comes
from kafka_testbed (the destination's Kafka version, whose jar set includes connect-mirror).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import kafka_testbed as tb


def mm2_properties(source_alias: str, target_alias: str, topics: str, groups: str, tasks: int,
                   identity_names: bool) -> str:
    flow = f"{source_alias}->{target_alias}"
    props = {
        "clusters": f"{source_alias},{target_alias}",
        f"{source_alias}.bootstrap.servers": tb.SOURCE.bootstrap,
        f"{target_alias}.bootstrap.servers": tb.DESTINATION.bootstrap,
        f"{flow}.enabled": "true",
        f"{target_alias}->{source_alias}.enabled": "false",
        f"{flow}.topics": topics,
        f"{flow}.groups": groups,
        "tasks.max": str(tasks),
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "offset-syncs.topic.location": "target",
        "emit.heartbeats.enabled": "false",
        "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2",
        "sync.topic.configs.enabled": "false",
        "sync.topic.acls.enabled": "false",
        # the same producer/consumer settings a production MM2 would use for throughput
        f"{flow}.producer.override.linger.ms": "20",
        f"{flow}.producer.override.batch.size": "262144",
        f"{flow}.consumer.isolation.level": "read_committed",
        "consumer.isolation.level": "read_committed",
    }
    if identity_names:
        props["replication.policy.class"] = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
    return "".join(f"{k}={v}\n" for k, v in props.items())


@contextlib.contextmanager
def running_mirrormaker(work_dir: Path, *, source_alias: str = "mmsrc", target_alias: str = "mmdst",
                        topics: str = ".*", groups: str = ".*", tasks: int = 2, identity_names: bool = False,
                        heap: str = "1g"):
    """Start MM2, yield its process, stop it on exit. Logs go to work_dir/mm2.log."""
    work_dir.mkdir(parents=True, exist_ok=True)
    props = work_dir / "mm2.properties"
    props.write_text(mm2_properties(source_alias, target_alias, topics, groups, tasks, identity_names))
    log_cfg = work_dir / "log4j2.properties"
    log_cfg.write_text(
        "status = warn\nappender.file.type = File\nappender.file.name = file\n"
        f"appender.file.fileName = {work_dir}/mm2.log\n"
        "appender.file.layout.type = PatternLayout\nappender.file.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = INFO\nrootLogger.appenderRef.file.ref = file\n"
    )
    cmd = [tb._java(), f"-Xmx{heap}", "-XX:+UseG1GC", f"-Dlog4j2.configurationFile={log_cfg}",
           f"-Dlog4j.configuration=file:{log_cfg}", "-cp", tb.classpath(tb.DESTINATION.kafka_version),
           "org.apache.kafka.connect.mirror.MirrorMaker", str(props)]
    with open(work_dir / "stdout.log", "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ})
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def wait_for(predicate, timeout_s: float, interval_s: float = 0.5, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise TimeoutError(f"{what} not reached in {timeout_s:g} s")
