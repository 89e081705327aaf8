"""Two real single-node KRaft Kafka clusters on loopback: the source (3.9.x) and the destination (4.x).

Why a script and not Docker: this workplace has no Docker engine, but it reaches Maven Central, so the
broker jars are resolved with `mvn` (cached per version) and each broker runs as a plain `java` process.
Standard library only, so it runs before the project's venv exists.

    python testbed/kafka_testbed.py up      # resolve jars (first time), format, start both, wait until they answer
    python testbed/kafka_testbed.py down    # stop both
    python testbed/kafka_testbed.py status
    python testbed/kafka_testbed.py wipe    # stop and delete the data directories

Each cluster has two client listeners: PLAINTEXT on its port (principal User:ANONYMOUS, a super user, so
tests and tools that need no security keep working) and SASL_SSL with SCRAM-SHA-512 on port + 2
(``KFERRY_<SIDE>_SASL_PORT``), certificates from a test-bed CA (``<run dir>/tls/ca.pem``). The
StandardAuthorizer denies what no ACL allows; the test bed's admin user (a super user) exists from the
format on, its password in ``<run dir>/tls/admin.password`` (mode 0600). Ordinary principals are created
by whoever needs them (SCRAM upserts through the admin API).
"""
from __future__ import annotations

import argparse
import base64
import dataclasses
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

TESTBED_DIR = Path(__file__).resolve().parent
REPO_DIR = TESTBED_DIR.parent
RUN_DIR = Path(os.environ.get("KFERRY_TESTBED_RUN_DIR", REPO_DIR / ".testbed"))
JAR_CACHE = Path(os.environ.get("KFERRY_JAR_CACHE", Path.home() / ".cache" / "kafka-ferry" / "jars"))
ADMIN_USER = "kferry-admin"
SCRAM_MECHANISM = "SCRAM-SHA-512"
# Brokers this process started: `subprocess` warns when a Popen of a still-running child is collected.
_DETACHED: list[subprocess.Popen] = []
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    name: str
    kafka_version: str
    broker_port: int
    controller_port: int
    sasl_port: int
    run_dir: Path = RUN_DIR

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def major(self) -> int:
        return int(self.kafka_version.split(".")[0])

    @property
    def home(self) -> Path:
        return self.run_dir / self.name


def _cluster(name: str, default_version: str, default_port: int, run_dir: Path = RUN_DIR,
             env_prefix: str = "KFERRY") -> ClusterSpec:
    """Versions and ports can be moved by env (KFERRY_SOURCE_PORT=…) so two checkouts can run side by side."""
    prefix = f"{env_prefix}_{name.upper()}"
    port = int(os.environ.get(f"{prefix}_PORT", default_port))
    sasl_port = int(os.environ.get(f"{prefix}_SASL_PORT", port + 2))
    version = os.environ.get(f"KFERRY_{name.upper()}_KAFKA", default_version)
    return ClusterSpec(name, version, port, port + 1, sasl_port, run_dir)


SOURCE = _cluster("source", "3.9.2", 19092)
DESTINATION = _cluster("destination", "4.3.0", 29092)
CLUSTERS = (SOURCE, DESTINATION)


def private_clusters(run_dir: Path, source_port: int, destination_port: int,
                     env_prefix: str = "KFERRY_PRIVATE") -> tuple[ClusterSpec, ClusterSpec]:
    """Another source/destination pair (own ports and data): for tests that kill and restart brokers."""
    return (_cluster("source", SOURCE.kafka_version, source_port, run_dir, env_prefix),
            _cluster("destination", DESTINATION.kafka_version, destination_port, run_dir, env_prefix))


def kip848_clusters(run_dir: Path, source_port: int, destination_port: int) -> tuple[ClusterSpec, ClusterSpec]:
    """A 4.x -> 4.x pair (own ports and data), both on the destination's Kafka version: both sides speak KIP-848's
    consumer group protocol (``group.protocol=consumer``), which the 3.9 source does not."""
    version = DESTINATION.kafka_version
    return (ClusterSpec("source", version, source_port, source_port + 1, source_port + 2, run_dir),
            ClusterSpec("destination", version, destination_port, destination_port + 1, destination_port + 2,
                        run_dir))


def tls_dir(spec: ClusterSpec) -> Path:
    return spec.run_dir / "tls"


def admin_password(spec: ClusterSpec) -> str:
    """The test bed admin's SCRAM password, made once per run dir and kept mode 0600."""
    path = tls_dir(spec) / "admin.password"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(18))
    return path.read_text().strip()


def sasl_client_config(spec: ClusterSpec, username: str, password: str) -> dict[str, str]:
    """librdkafka settings for the SASL_SSL listener (what a `kafka` connection's Extra holds)."""
    return {"bootstrap.servers": spec.sasl_bootstrap, "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM, "sasl.username": username, "sasl.password": password,
            "ssl.ca.location": str(tls_dir(spec) / "ca.pem")}


def maven_jars(pom: str, target: Path, version: str, what: str, *properties: str) -> Path:
    """Resolve (once) the dependencies of one of the test bed's poms into ``target`` with Maven; a marker file says
    the copy is complete, so an interrupted one is done again. ``properties``: the ``-D`` settings the pom reads."""
    marker = target / ".complete"
    if marker.exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    cmd = ["mvn", "-q", "-B", "-f", str(TESTBED_DIR / pom), "dependency:copy-dependencies",
           *(f"-D{p}" for p in properties), f"-DoutputDirectory={target}"]
    print(f"resolving {what} with Maven into {target} ...", flush=True)
    subprocess.run(cmd, check=True)
    marker.write_text(version)
    return target


def jar_dir(version: str) -> Path:
    """Resolve (once) every jar a broker, the CLI tools and MirrorMaker 2 of this version need."""
    return maven_jars("pom.xml", JAR_CACHE / version, version, f"Kafka {version} jars", f"kafka.version={version}")


def classpath(version: str) -> str:
    """The jar list; 3.x brings reload4j as its SLF4J binding, so the log4j2 binding is left out there."""
    jars = sorted(jar_dir(version).glob("*.jar"))
    if any(j.name.startswith("slf4j-reload4j") for j in jars):
        jars = [j for j in jars if not j.name.startswith("log4j-slf4j-impl")]
    return os.pathsep.join(str(j) for j in jars)


def _logging_opts(spec: ClusterSpec) -> list[str]:
    log_dir = spec.home / "logs"
    if spec.major >= 4:
        cfg = spec.home / "log4j2.properties"
        cfg.write_text(
            "status = warn\n"
            "appender.file.type = File\nappender.file.name = file\n"
            f"appender.file.fileName = {log_dir}/server.log\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\nrootLogger.appenderRef.file.ref = file\n"
            "logger.kafka.name = kafka\nlogger.kafka.level = INFO\n"
            "logger.org.name = org.apache.kafka\nlogger.org.level = INFO\n"
        )
        return [f"-Dlog4j2.configurationFile={cfg}", f"-Dkafka.logs.dir={log_dir}"]
    cfg = spec.home / "log4j.properties"
    cfg.write_text(
        "log4j.rootLogger=INFO, file\n"
        "log4j.appender.file=org.apache.log4j.FileAppender\n"
        f"log4j.appender.file.File={log_dir}/server.log\n"
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
    )
    return [f"-Dlog4j.configuration=file:{cfg}", f"-Dkafka.logs.dir={log_dir}"]


def _security_properties(spec: ClusterSpec) -> dict[str, str]:
    """SASL_SSL/SCRAM listener, PEM keystore, authorizer; PLAINTEXT (ANONYMOUS) and the admin are super users."""
    import testbed_tls

    keystore = testbed_tls.ensure_broker_keystore(tls_dir(spec), spec.name)
    return {
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:ANONYMOUS;User:{ADMIN_USER}",
    }


def _server_properties(spec: ClusterSpec) -> str:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{spec.controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{spec.broker_port},CONTROLLER://127.0.0.1:{spec.controller_port},"
                     f"SASL_SSL://127.0.0.1:{spec.sasl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{spec.broker_port},SASL_SSL://127.0.0.1:{spec.sasl_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
        "log.dirs": str(spec.home / "data"),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        "log.cleaner.backoff.ms": "500",
        "log.retention.check.interval.ms": "1000",
        "log.segment.delete.delay.ms": "500",
        "file.delete.delay.ms": "500",
    }
    if spec.major >= 4:
        props["share.coordinator.state.topic.replication.factor"] = "1"
        props["share.coordinator.state.topic.min.isr"] = "1"
    props.update(_security_properties(spec))
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _pid_file(spec: ClusterSpec) -> Path:
    return spec.home / "broker.pid"


def alive(pid: int) -> bool:
    """The process runs; a zombie child of this process (ended, not yet reaped) counts as gone, and is reaped."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:  # not our child: kill(pid, 0) answered for it
        return True


def recorded_pid(pid_file: Path) -> int | None:
    """The pid a pid file names while that process lives (shared by the test bed's other services)."""
    try:
        pid = int(pid_file.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return pid if alive(pid) else None


def stop_recorded(pid_file: Path, timeout_s: float = 30.0) -> bool:
    """TERM the process group a pid file's leader heads, KILL it after `timeout_s`; drop the file.
    False when nothing recorded there was running. Shared by the brokers, registries and Spark services."""
    pid = recorded_pid(pid_file)
    if pid is not None:
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.2)
        if alive(pid):
            os.killpg(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    return pid is not None


def _running_pid(spec: ClusterSpec) -> int | None:
    return recorded_pid(_pid_file(spec))


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _java() -> str:
    return os.environ.get("KFERRY_JAVA", shutil.which("java") or "java")


def new_cluster_id(draw: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding.

    One id in 64 would begin with "-", and kafka-storage's argument parser reads such a value as an option
    ("argument --cluster-id/-t: expected one argument"): a CI run failed that way. Kafka's own
    Uuid.randomUuid() draws again in that case; so does this. ``draw``: where the random UUIDs come from.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(draw().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def start(spec: ClusterSpec) -> None:
    if _running_pid(spec):
        print(f"{spec.name}: already running ({spec.bootstrap})")
        return
    if _answers(spec.broker_port):
        raise SystemExit(f"{spec.name}: port {spec.broker_port} is taken by another process")
    (spec.home / "logs").mkdir(parents=True, exist_ok=True)
    props = spec.home / "server.properties"
    props.write_text(_server_properties(spec))
    cp = classpath(spec.kafka_version)
    log_opts = _logging_opts(spec)
    if not (spec.home / "data" / "meta.properties").exists():
        cluster_id = new_cluster_id()
        # The admin's SCRAM credential is written with the metadata: the SASL listener works from the start.
        # (A one-off local process; the password is the test bed's own, kept in a 0600 file.)
        scram = f"{SCRAM_MECHANISM}=[name={ADMIN_USER},password={admin_password(spec)}]"
        formatted = subprocess.run([_java(), "-cp", cp, *log_opts, "kafka.tools.StorageTool", "format",
                                    "-t", cluster_id, "-c", str(props), "--add-scram", scram],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if formatted.returncode != 0:
            # Never echo the command line: it holds the admin's password.
            raise SystemExit(f"{spec.name}: formatting {spec.home / 'data'} failed (exit {formatted.returncode}): "
                             f"{formatted.stderr.replace(admin_password(spec), '***').strip()[-2000:]}")
    log = spec.home / "logs" / "server.log"
    (spec.home / "log.offset").write_text(str(log.stat().st_size if log.exists() else 0))
    heap = os.environ.get("KFERRY_BROKER_HEAP", "768m")
    cmd = [_java(), f"-Xmx{heap}", f"-Xms{heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
           *log_opts, "-cp", cp, "kafka.Kafka", str(props)]
    with open(spec.home / "logs" / "stdout.log", "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    _pid_file(spec).write_text(str(proc.pid))
    _DETACHED.append(proc)  # stopped by pid (`stop`/`kill`); kept so no running child is garbage-collected
    print(f"{spec.name}: started Kafka {spec.kafka_version} pid {proc.pid} on {spec.bootstrap}", flush=True)


def wait_ready(spec: ClusterSpec, timeout_s: float = 90.0) -> None:
    """Ready means the port answers and the broker logged that it finished starting."""
    deadline = time.monotonic() + timeout_s
    log = spec.home / "logs" / "server.log"
    while time.monotonic() < deadline:
        if _running_pid(spec) is None:
            raise SystemExit(f"{spec.name}: broker exited; see {spec.home / 'logs'}")
        text = log.read_text(errors="replace")[_log_offset(spec):] if log.exists() else ""
        if "Kafka Server started" in text and _answers(spec.broker_port):
            print(f"{spec.name}: ready on {spec.bootstrap}", flush=True)
            return
        time.sleep(0.3)
    raise SystemExit(f"{spec.name}: not ready after {timeout_s}s; see {spec.home / 'logs'}")


def _log_offset(spec: ClusterSpec) -> int:
    """Where this start's lines begin in server.log (a restarted broker appends to the old log)."""
    try:
        return int((spec.home / "log.offset").read_text())
    except (FileNotFoundError, ValueError):
        return 0


def kill(spec: ClusterSpec) -> int:
    """kill -9 the broker process (a crash: no controlled shutdown); returns the pid it killed."""
    pid = _running_pid(spec)
    if pid is None:
        raise RuntimeError(f"{spec.name}: not running")
    os.killpg(pid, signal.SIGKILL)
    while _running_pid(spec) == pid:
        try:
            os.waitpid(pid, 0)  # reap it when this process started it
        except ChildProcessError:
            time.sleep(0.1)
    _pid_file(spec).unlink(missing_ok=True)
    return pid


def stop(spec: ClusterSpec, timeout_s: float = 30.0) -> None:
    print(f"{spec.name}: {'stopped' if stop_recorded(_pid_file(spec), timeout_s) else 'not running'}")


def up() -> None:
    for spec in CLUSTERS:
        jar_dir(spec.kafka_version)
    for spec in CLUSTERS:
        start(spec)
    for spec in CLUSTERS:
        wait_ready(spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "status", "wipe", "jars", "classpath"])
    parser.add_argument("--version", help="Kafka version for 'classpath'", default=DESTINATION.kafka_version)
    args = parser.parse_args(argv)
    if args.action == "up":
        up()
    elif args.action == "down":
        for spec in CLUSTERS:
            stop(spec)
    elif args.action == "wipe":
        for spec in CLUSTERS:
            stop(spec)
            shutil.rmtree(spec.home, ignore_errors=True)
    elif args.action == "jars":
        for spec in CLUSTERS:
            print(jar_dir(spec.kafka_version))
    elif args.action == "classpath":
        print(classpath(args.version))
    else:
        for spec in CLUSTERS:
            pid = _running_pid(spec)
            state = f"running pid {pid}" if pid else "stopped"
            print(f"{spec.name}: Kafka {spec.kafka_version} {spec.bootstrap} (SASL_SSL {spec.sasl_bootstrap}) {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
