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
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kafka_ferry.core.cluster_model import ClusterInfo
from kafka_ferry.io.kafka_errors import KafkaClusterError

CLUSTER_CONFIGS_ENV = "KFERRY_CLUSTER_CONFIGS"
ROLES = ("source", "destination")
TIMEOUT_S = 30.0


def encode_cluster_configs(source: Mapping[str, Any], destination: Mapping[str, Any]) -> str:
    """The value of ``KFERRY_CLUSTER_CONFIGS``; secret, like the configs it holds."""
    return json.dumps({"source": dict(source), "destination": dict(destination)})


def load_cluster_configs(environ: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Read both clusters' configs from the environment; the error never echoes the value."""
    raw = (os.environ if environ is None else environ).get(CLUSTER_CONFIGS_ENV)
    if not raw:
        raise RuntimeError(f"{CLUSTER_CONFIGS_ENV} is not set: the copy job needs both clusters' client configs")
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
            raise KafkaClusterError(self.kafka_config_id, "describe cluster", exc.args[0]) from None
        return ClusterInfo(cluster_id=result.cluster_id, broker_count=len(result.nodes))

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
                raise KafkaClusterError(self.kafka_config_id, f"list {which} offsets of {tp.topic}-{tp.partition}",
                                        exc.args[0]) from None
        return out
