"""The test bed's Kafka Streams application (testbed/streams_app/WordCount.java): built and run for the tests that
move a Streams application as one unit (issue 40).

Kafka Streams (``org.apache.kafka:kafka-streams`` and its dependencies) is resolved once with Maven into the test
bed's jar cache (like the brokers' jars, ``kafka_testbed.jar_dir``), and the one source file is compiled with the
JDK's ``javac`` into a cache directory keyed by the Streams version and the source's hash, so an edit rebuilds and
nothing else does. Each run is a plain ``java`` process in its own session, started and stopped by pid; its
bootstrap, application id, topics, state dir and group protocol come from arguments (client settings that could
hold secrets only from a 0600 properties file, never the command line).

    python testbed/streams_app.py build     # resolve (first time), compile, print the class directory
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from kafka_testbed import JAR_CACHE, TESTBED_DIR, alive, maven_jars, stop_recorded

STREAMS_VERSION = os.environ.get("KFERRY_STREAMS_KAFKA", "4.3.0")
SOURCE = TESTBED_DIR / "streams_app" / "WordCount.java"
MAIN_CLASS = "WordCount"
BUILD_CACHE = Path(os.environ.get("KFERRY_STREAMS_APP_CACHE",
                                  Path.home() / ".cache" / "kafka-ferry" / "streams-app"))
# The topology's names (WordCount.java): the app's internal topics are <application.id>-<name>-<suffix>.
REPARTITION_NAME, STORE_NAME = "words", "counts"


def jar_dir(version: str = STREAMS_VERSION) -> Path:
    """Resolve (once) kafka-streams and its dependencies of this version."""
    return maven_jars("streams-pom.xml", JAR_CACHE / f"kafka-streams-{version}", version,
                      f"Kafka Streams {version}", f"kafka.version={version}")


def classpath(version: str = STREAMS_VERSION) -> list[Path]:
    return sorted(jar_dir(version).glob("*.jar"))


def _java(tool: str) -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / tool).exists():
        return str(Path(home) / "bin" / tool)
    return shutil.which(tool) or tool


def build(version: str = STREAMS_VERSION) -> Path:
    """The compiled application's class directory (compiled once per Streams version and source text)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    target = BUILD_CACHE / f"{version}-{digest}"
    if (target / f"{MAIN_CLASS}.class").exists():
        return target
    staging = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    cp = os.pathsep.join(str(j) for j in classpath(version))
    subprocess.run([_java("javac"), "--release", "17", "-nowarn", "-cp", cp, "-d", str(staging), str(SOURCE)],
                   check=True)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # whole or not at all: a half-built directory is never taken as built
    return target


@dataclasses.dataclass(frozen=True)
class StreamsRun:
    """One run of the application: its pid file and output log, in ``home``."""

    home: Path
    pid: int
    process: subprocess.Popen | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def log(self) -> Path:
        return self.home / "app.log"

    @property
    def pid_file(self) -> Path:
        return self.home / "app.pid"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def running(self) -> bool:
        return alive(self.pid)

    def stop(self, timeout_s: float = 60.0) -> None:
        """TERM (Streams closes: commits its transaction, leaves the group), KILL after ``timeout_s``."""
        stop_recorded(self.pid_file, timeout_s)
        if self.process is not None:
            self.process.wait(10)  # reaped: ended by now (TERM, else KILL)


def start(home: Path, *, bootstrap: str, application_id: str, input_topic: str, output_topic: str,
          state_dir: Path, group_protocol: str = "classic", purge_interval_ms: int = 30_000,
          config_file: Path | None = None,
          ready_timeout_s: float = 180.0, version: str = STREAMS_VERSION) -> StreamsRun:
    """Start the application and wait until Streams reports RUNNING; a run that ends or errs first is stopped and
    fails with its log's tail."""
    classes = build(version)
    home.mkdir(parents=True, exist_ok=True)
    cp = os.pathsep.join([str(classes), *(str(j) for j in classpath(version))])
    args = ["--bootstrap", bootstrap, "--application-id", application_id, "--input", input_topic,
            "--output", output_topic, "--state-dir", str(state_dir), "--group-protocol", group_protocol,
            "--purge-interval-ms", str(purge_interval_ms)]
    if config_file is not None:
        args += ["--config-file", str(config_file)]
    heap = os.environ.get("KFERRY_STREAMS_APP_HEAP", "256m")
    log = home / "app.log"
    offset = log.stat().st_size if log.exists() else 0  # an earlier run's lines in the same log do not count
    with open(log, "ab") as out:
        proc = subprocess.Popen([_java("java"), f"-Xmx{heap}", "-XX:TieredStopAtLevel=1", "-cp", cp, MAIN_CLASS,
                                 *args], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    run = StreamsRun(home, proc.pid, proc)
    run.pid_file.write_text(str(proc.pid))
    deadline = time.monotonic() + ready_timeout_s
    while True:
        text = run.output()[offset:]
        if "state RUNNING" in text:
            return run
        if "state ERROR" in text or not run.running() or time.monotonic() > deadline:
            run.stop(10)
            raise RuntimeError(f"Streams application {application_id} did not reach RUNNING; log {log}:\n"
                               f"{text[-3000:]}")
        time.sleep(0.3)


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        raise SystemExit("usage: streams_app.py build")
    print(build())
