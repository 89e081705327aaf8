"""Both clusters' client configs as the copy job receives them, and the clusters built from them.

The Airflow side resolves both clusters' connections and hands their configs to the Spark job in one
environment variable (``KFERRY_CLUSTER_CONFIGS``) or a credentials file, never on the command line, in the
plan or in XCom. The job then builds the same ``KafkaCluster`` the Airflow side uses, named by role.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_ferry.core.batches.spark_credentials import CONFIGS_FILE_ENV
from kafka_ferry.kafka.cluster import KafkaCluster

CLUSTER_CONFIGS_ENV = "KFERRY_CLUSTER_CONFIGS"
ROLES = ("source", "destination")


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


def cluster(configs: Mapping[str, Mapping[str, Any]], role: str, *, reuse_producers: bool = False) -> KafkaCluster:
    """The cluster of ``role`` ("source" or "destination"), named by its role in errors."""
    return KafkaCluster(role, configs[role], reuse_producers=reuse_producers)
