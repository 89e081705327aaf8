"""Deliver both clusters' client configs to a spark-submit job, and prove before submitting that none leaks.

``core.batches.spark_credentials`` decides, purely, how the configs travel for a master (env, Kubernetes Secret, file);
this module does the I/O of that decision: it writes the 0600 credentials file in a directory of its own (removed
when the run ends, whatever happens), builds the env, conf and ``--files`` the spark-submit task adds, and checks
the command the Spark provider's hook will run for any secret value. The copy operator only applies the result.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_ferry.core.batches.spark_credentials import (
    CREDENTIALS_FILE_NAME,
    InsecureChannelRefused,
    SparkTarget,
    check_connect_url,
    check_standalone_master,
    delivery_for,
    secret_values,
)
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.specs.spec import CopySettings
from kafka_ferry.kafka.configs import CLUSTER_CONFIGS_ENV, encode_cluster_configs

ClusterConfigs = Mapping[str, Mapping[str, Any]]


class SparkConnectionRefused(Permanent, ValueError):
    """The Spark connection cannot carry the credentials safely (or at all): no retry changes that."""

    def __init__(self, conn_id: str, reason: str):
        super().__init__(f"Spark connection '{conn_id}': {reason}")


@dataclass(frozen=True)
class SubmitCredentials:
    """What the spark-submit task adds for the credentials; ``secrets`` are what must appear nowhere else."""

    target: SparkTarget
    env: dict[str, str] = field(default_factory=dict)
    conf: dict[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()


@contextmanager
def submit_credentials(conn_id: str, target: SparkTarget, settings: CopySettings,
                       cluster_configs: Callable[[], ClusterConfigs]) -> Iterator[SubmitCredentials]:
    """The credentials for one spark-submit run to ``target``; the credentials file lives for the run only.

    ``cluster_configs`` is called only when the delivery needs the value (never for a Kubernetes Secret: the
    worker then never holds it).
    """
    credentials_dir = Path(tempfile.mkdtemp(prefix="kferry-credentials-"))  # 0700, this run only
    try:
        path = credentials_dir / CREDENTIALS_FILE_NAME
        try:
            delivery = delivery_for(target, settings.kubernetes_credentials_secret, path, settings.credentials_file)
        except ValueError as exc:
            raise SparkConnectionRefused(conn_id, str(exc)) from None
        secret_env: dict[str, str] = {}
        secrets: list[str] = []
        if delivery.needs_secret_env or delivery.needs_file:
            configs = {role: dict(config) for role, config in cluster_configs().items()}
            secrets = [*secret_values(configs), secret := encode_cluster_configs(**configs)]
            if delivery.needs_file:
                _write_private(path, secret)
            else:
                secret_env = {CLUSTER_CONFIGS_ENV: secret}
        yield SubmitCredentials(target, {**delivery.env, **secret_env}, dict(delivery.conf), delivery.files,
                                tuple(secrets))
    finally:
        shutil.rmtree(credentials_dir, ignore_errors=True)  # the credentials file lives for the run only


def refuse_leaks(conn_id: str, hook: Any, application: str, credentials: SubmitCredentials) -> None:
    """Invariant before submitting: the command the hook will run, and the env it would copy into Spark conf,
    hold no secret; and the hook classifies the master as the delivery was decided for."""
    target = credentials.target
    if (hook._is_yarn, hook._is_kubernetes) != (target.provider_yarn, target.provider_kubernetes):
        raise SparkConnectionRefused(conn_id, "the master changed while submitting")
    command = " ".join(hook._build_spark_submit_command(application))
    if any(s in command for s in credentials.secrets):
        raise SparkConnectionRefused(conn_id, "refused to submit: a credential would be on the spark-submit command "
                                              f"line for master {target.master!r}")


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def check_connect_server(conn_id: str, url: str) -> None:
    """Refuse a Spark Connect server the clusters' configs would reach in clear (``check_connect_url``), naming
    the connection."""
    try:
        check_connect_url(url)
    except InsecureChannelRefused as exc:
        raise SparkConnectionRefused(conn_id, str(exc)) from None


def check_standalone_channel(conn_id: str, target: SparkTarget, conf: Mapping[str, str]) -> None:
    """Refuse a ``spark://`` master off the loopback whose Spark conf leaves RPC authentication or encryption off
    (``check_standalone_master``), naming the connection."""
    try:
        check_standalone_master(target.master, conf)
    except InsecureChannelRefused as exc:
        raise SparkConnectionRefused(conn_id, str(exc)) from None
