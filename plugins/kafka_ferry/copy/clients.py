"""Kafka clients built from a plain librdkafka config, for code that runs without Airflow (the Spark job).

The Airflow side resolves both clusters' connections and hands their configs to the Spark job in one
environment variable (``KFERRY_CLUSTER_CONFIGS``), never on the command line, in the plan or in XCom.
``ClusterClients`` offers the subset of ``KafkaClusterHook`` that ``MigrationStateStore`` and the copy
need, so both run unchanged inside executors.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kafka_ferry.core.acl_plan import principal_of
from kafka_ferry.core.cluster_model import ClusterInfo
from kafka_ferry.core.spark_credentials import CONFIGS_FILE_ENV
from kafka_ferry.io.kafka_errors import KafkaClusterError

CLUSTER_CONFIGS_ENV = "KFERRY_CLUSTER_CONFIGS"
ROLES = ("source", "destination")
TIMEOUT_S = 30.0


def encode_cluster_configs(source: Mapping[str, Any], destination: Mapping[str, Any]) -> str:
    """The value of ``KFERRY_CLUSTER_CONFIGS``; secret, like the configs it holds."""
    return json.dumps({"source": dict(source), "destination": dict(destination)})


def load_cluster_configs(environ: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Read both clusters' configs from the environment; the error never echoes the value."""
    environ = os.environ if environ is None else environ
    raw = environ.get(CLUSTER_CONFIGS_ENV) or _read_credentials_file(environ.get(CONFIGS_FILE_ENV))
    if not raw:
        raise RuntimeError(f"{CLUSTER_CONFIGS_ENV} is not set (nor {CONFIGS_FILE_ENV}): the copy job needs both "
                           "clusters' client configs")
    try:
        configs = json.loads(raw)
    except ValueError:
        raise RuntimeError(f"{CLUSTER_CONFIGS_ENV} is not valid JSON") from None
    if not isinstance(configs, dict) or any(not isinstance(configs.get(r), dict) for r in ROLES):
        raise RuntimeError(f"{CLUSTER_CONFIGS_ENV} must be a JSON object with 'source' and 'destination' objects")
    for role in ROLES:
        if "bootstrap.servers" not in configs[role]:
            raise RuntimeError(f"{CLUSTER_CONFIGS_ENV}: the {role} config has no bootstrap.servers")
    return {role: configs[role] for role in ROLES}


def _read_credentials_file(path: str | None) -> str | None:
    """The file the task shipped: its own path (client mode) or, in a YARN container, its name in the cwd."""
    if not path:
        return None
    for candidate in (Path(path), Path.cwd() / Path(path).name):
        if candidate.is_file():
            return candidate.read_text()
    raise RuntimeError(f"{CONFIGS_FILE_ENV}: no credentials file at {path} nor {Path(path).name} in the cwd")


class ClusterClients:
    """Producer, consumer and the few admin calls the copy needs, on one cluster.

    ``kafka_config_id`` names the cluster's role in errors, as the hook names its connection.
    """

    def __init__(self, role: str, config: Mapping[str, Any], reuse_producers: bool = False) -> None:
        self.kafka_config_id = role
        self._config = dict(config)
        # Why: a producer per call costs a connection and an InitProducerId round trip (~0.3-0.5 s), which
        # the state store paid per partition. Callers that flush after every use may share one per config.
        self._producers: dict[tuple, Producer] | None = {} if reuse_producers else None

    @property
    def bootstrap_servers(self) -> str | None:
        """The addresses errors name (never the rest of the config)."""
        return self._config.get("bootstrap.servers")

    @cached_property
    def principal(self) -> str | None:
        """Who the config authenticates as (named in authorization errors); not a secret."""
        return principal_of(self._config)

    @cached_property
    def admin(self) -> AdminClient:
        return AdminClient(dict(self._config))

    def producer(self, **overrides: Any) -> Producer:
        if self._producers is None:
            return Producer({**self._config, **overrides})
        key = tuple(sorted((k, repr(v)) for k, v in overrides.items()))
        if key not in self._producers:
            self._producers[key] = Producer({**self._config, **overrides})
        return self._producers[key]

    def consumer(self, **overrides: Any) -> Consumer:
        config = {"group.id": "kafka-ferry-reader", "enable.auto.commit": False, **overrides}
        return Consumer({**self._config, **config})

    def describe_cluster(self) -> ClusterInfo:
        try:
            result = self.admin.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise KafkaClusterError.on(self, "describe cluster", exc.args[0]) from None
        return ClusterInfo(cluster_id=result.cluster_id, broker_count=len(result.nodes))

    def list_partitions(self, topics: Iterable[str]) -> set[tuple[str, int]]:
        """The existing (topic, partition) pairs of these topics (a missing topic has none)."""
        out = set()
        for topic in sorted(set(topics)):
            try:
                metadata = self.admin.list_topics(topic=topic, timeout=TIMEOUT_S)
            except KafkaException as exc:
                raise KafkaClusterError.on(self, f"describe topic {topic}", exc.args[0],
                                           acl={"TOPIC": ("DESCRIBE", topic)}) from None
            info = metadata.topics.get(topic)
            if info is not None and info.error is None:
                out |= {(topic, p) for p in info.partitions}
        return out

    def list_offsets(self, partitions: Iterable[tuple[str, int]], which: str = "latest",
                     read_committed: bool = True) -> dict[tuple[str, int], int]:
        """Earliest or latest (last stable under read_committed) offset per partition."""
        spec = {"earliest": OffsetSpec.earliest, "latest": OffsetSpec.latest}[which]()
        request = {TopicPartition(t, p): spec for t, p in partitions}
        if not request:
            return {}
        isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        futures = self.admin.list_offsets(request, isolation_level=isolation, request_timeout=TIMEOUT_S)
        out = {}
        for tp, future in futures.items():
            try:
                out[(tp.topic, tp.partition)] = future.result(timeout=TIMEOUT_S).offset
            except KafkaException as exc:
                raise KafkaClusterError.on(self, f"list {which} offsets of {tp.topic}-{tp.partition}",
                                           exc.args[0],
                                           acl={"TOPIC": ("DESCRIBE", tp.topic)}) from None
        return out
