"""KIP-1071 streams groups (``group.protocol=streams``, Kafka 4.2+), listed and described with Kafka's Java Admin:
the one call librdkafka lacks, wrapped alone.

Why Java and not a request of our own: librdkafka neither lists a streams group nor describes it (it answers "Dead,
no members" while the application runs); the StreamsGroupDescribe request (API key 89) would need a connection of
our own with every SASL mechanism and TLS setting the connections use. Kafka's own Admin client
(``Admin#listGroups`` for the streams type, ``Admin#describeStreamsGroups``) already speaks them, and is maintained
with the protocol. ``StreamsGroups.java`` (next to this file, ~100 lines) is compiled once with the JDK's ``javac``
against the kafka-clients jars and run as a subprocess per call.

It is opt-in: ``KFERRY_KAFKA_CLIENTS_CLASSPATH`` names the kafka-clients jars (a directory of jars, or a class
path), 4.1 or later, with a JDK (``JAVA_HOME``, else ``java``/``javac`` on PATH). Without it, or when the call
fails, a streams group stays UNDESCRIBED (``core.common.cluster_model``): counted live, and a migration that selects it
is refused. Credentials: the connection's settings (``core.common.java_client_config``) go to a 0600 file in a private
directory, removed after the run, never to the command line; group ids go on stdin.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.common.java_client_config import UntranslatableConfig, java_properties, properties_text
from kafka_ferry.storage.private import private_directory
from kafka_ferry.storage.workdir import local_base

log = logging.getLogger(__name__)

CLASSPATH_ENV = "KFERRY_KAFKA_CLIENTS_CLASSPATH"
SOURCE = Path(__file__).with_name("StreamsGroups.java")
MAIN_CLASS = "StreamsGroups"
TIMEOUT_S = 120.0
WAY_OUT = (f"set {CLASSPATH_ENV} to kafka-clients jars of 4.1 or later (and JAVA_HOME to a JDK), or move the "
           "application under a classic group (group.protocol=classic)")


class StreamsGroupsUnavailable(Retryable, RuntimeError):
    """The Java call could not be made or failed; the message names why (never a setting's value). Retryable: a
    later try may find the cluster answering (kafka.cluster catches it and keeps the group UNDESCRIBED)."""


@dataclasses.dataclass(frozen=True)
class StreamsGroup:
    """One streams group as Kafka's Admin describes it: its state (GroupState: EMPTY, NOT_READY, ASSIGNING,
    RECONCILING, STABLE, DEAD), its members, and the topics of its topology: the application's input (source
    topics that are not its own repartition topics) and its internal (changelog, repartition) topics."""

    group_id: str
    state: str
    members: int
    source_topics: tuple[str, ...]
    internal_topics: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class StreamsGroupsAnswer:
    listed: tuple[str, ...]
    described: Mapping[str, StreamsGroup]
    missing: Mapping[str, str]  # group -> why it was not described (not a streams group, not found)


def configured(environ: Mapping[str, str] | None = None) -> bool:
    return bool((os.environ if environ is None else environ).get(CLASSPATH_ENV))


def parse_answer(text: str) -> StreamsGroupsAnswer:
    """The helper's stdout: ``{"listed": [...]}`` then one line per group asked for (see StreamsGroups.java)."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not lines or "listed" not in lines[0]:
        raise StreamsGroupsUnavailable("the Java helper printed no group listing")
    described: dict[str, StreamsGroup] = {}
    missing: dict[str, str] = {}
    for item in lines[1:]:
        if "error" in item:
            missing[item["group"]] = f"{item['error']}: {item.get('message', '')}"
        else:
            described[item["group"]] = StreamsGroup(item["group"], item["state"], int(item["members"]),
                                                    tuple(item["source_topics"]), tuple(item["internal_topics"]))
    return StreamsGroupsAnswer(tuple(lines[0]["listed"]), described, missing)


def _java(tool: str, environ: Mapping[str, str]) -> str:
    home = environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / tool).exists():
        return str(Path(home) / "bin" / tool)
    found = shutil.which(tool, path=environ.get("PATH"))
    if not found:
        raise StreamsGroupsUnavailable(f"no {tool} (JAVA_HOME unset and none on PATH)")
    return found


def _classpath(environ: Mapping[str, str]) -> str:
    value = environ.get(CLASSPATH_ENV, "")
    entries = [Path(e) for e in value.split(os.pathsep) if e]
    jars = [str(j) for e in entries for j in (sorted(e.glob("*.jar")) if e.is_dir() else [e])]
    if not any(Path(j).name.startswith("kafka-clients-") for j in jars):
        raise StreamsGroupsUnavailable(f"{CLASSPATH_ENV} holds no kafka-clients jar")
    return os.pathsep.join(jars)


def _compiled(classpath: str, environ: Mapping[str, str]) -> Path:
    """The helper's class directory, compiled once per source text and kafka-clients jar (private to this user:
    the JVM runs code from it with the connection's credentials)."""
    clients = sorted(Path(j).name for j in classpath.split(os.pathsep) if Path(j).name.startswith("kafka-clients-"))
    digest = hashlib.sha256(SOURCE.read_bytes() + "|".join(clients).encode()).hexdigest()[:16]
    root = private_directory(local_base(environ) / "java", "the Java helpers' directory", WAY_OUT)
    target = root / f"streams-groups-{digest}"
    if (target / f"{MAIN_CLASS}.class").exists():
        return target
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=root))
    done = subprocess.run([_java("javac", environ), "--release", "17", "-nowarn", "-cp", classpath,
                           "-d", str(staging), str(SOURCE)], capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise StreamsGroupsUnavailable(f"javac failed on {SOURCE.name} (kafka-clients {', '.join(clients)}; 4.1 or "
                                       f"later needed): {done.stderr.strip()[-500:]}")
    try:
        staging.rename(target)  # whole or not at all; a concurrent first build that won is as good
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def streams_groups(config: Mapping[str, Any], group_ids: Iterable[str],
                   environ: Mapping[str, str] | None = None) -> StreamsGroupsAnswer:
    """List the cluster's streams groups and describe ``group_ids`` through Kafka's Java Admin, with the connection
    ``config`` (librdkafka's settings, translated). Raises ``StreamsGroupsUnavailable`` naming why it could not."""
    environ = dict(os.environ if environ is None else environ)
    if not configured(environ):
        raise StreamsGroupsUnavailable(f"{CLASSPATH_ENV} is not set")
    try:
        props = java_properties({k: v for k, v in config.items() if isinstance(v, (str, int, float, bool))},
                                lambda path: Path(path).read_text())
    except (UntranslatableConfig, OSError) as exc:
        raise StreamsGroupsUnavailable(str(exc)) from None
    classpath = _classpath(environ)
    classes = _compiled(classpath, environ)
    run_dir = private_directory(local_base(environ) / "java" / "run", "the Java helpers' run directory", WAY_OUT)
    fd, props_path = tempfile.mkstemp(prefix="streams-groups.", suffix=".properties", dir=run_dir)  # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(properties_text(props))
        try:
            done = subprocess.run([_java("java", environ), "-Xmx128m", "-XX:TieredStopAtLevel=1",
                                   "-cp", os.pathsep.join([str(classes), classpath]), MAIN_CLASS, props_path],
                                  input="".join(f"{g}\n" for g in sorted(set(group_ids))), capture_output=True,
                                  text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise StreamsGroupsUnavailable(f"the Java helper did not answer in {TIMEOUT_S:.0f} s") from None
    finally:
        os.unlink(props_path)
    if done.returncode != 0:
        tail = [line for line in done.stderr.splitlines() if "Exception" in line or "Error" in line][-3:]
        raise StreamsGroupsUnavailable(f"the Java helper failed (exit {done.returncode}): {' | '.join(tail)}")
    return parse_answer(done.stdout)
