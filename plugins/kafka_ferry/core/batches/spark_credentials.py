"""How the copy job gets both clusters' client configs without a secret on any command line, per Spark master.

Decided from the master *as the Spark provider's SparkSubmitHook resolved it* (``SparkTarget``), because the
hook, not the URL's scheme, decides where ``env_vars`` go: it treats any master containing "yarn" as YARN
(``--conf spark.yarn.appMasterEnv.K=V`` on the command line, readable in ``ps``, Spark's UI and event log) and
any containing "k8s" as Kubernetes (``--conf spark.kubernetes.driverEnv.K=V``). So ``spark://yarn-gw01:7077``
is YARN to the hook, and must never be handed the secret as an env var.

- env (the hook puts env_vars only on the spark-submit process: not YARN, not Kubernetes to the hook, client
  mode): ``KFERRY_CLUSTER_CONFIGS`` in that process's environment (readable by its own user only); executors
  get the configs in the task closure.
- kubernetes-secret (a real ``k8s://`` master): the pods read ``KFERRY_CLUSTER_CONFIGS`` from a Kubernetes
  Secret (``spark.kubernetes.{driver,executor}.secretKeyRef``); the Airflow worker never holds the value.
- file (YARN to the hook, any master in cluster deploy mode, or when asked): a credentials file, mode 0600 in a
  directory of its own, shipped with ``--files`` and named by ``KFERRY_CLUSTER_CONFIGS_FILE`` (a path, not a
  secret); removed after the run.
- refused: a master the hook calls Kubernetes that is not ``k8s://`` (the hook would not pass the file's path
  to the driver), named with the reason.

A standalone ``spark://`` master off the loopback (any of its hosts, for an HA list) gets the configs in the task
closure, which Spark sends over its RPC to executors on other hosts: it is refused unless the Spark conf the job
runs with turns on RPC authentication and encryption (``spark.authenticate=true`` and
``spark.network.crypto.enabled=true``, ``check_standalone_master``), as a Spark Connect server off the loopback is
refused without TLS and a token (``check_connect_url``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.specs.patterns import SECRET_REF  # <Secret name>:<key>

CONFIGS_ENV = "KFERRY_CLUSTER_CONFIGS"
CONFIGS_FILE_ENV = "KFERRY_CLUSTER_CONFIGS_FILE"
CREDENTIALS_FILE_NAME = "kferry-credentials.json"


@dataclass(frozen=True)
class CredentialDelivery:
    """What the copy task adds to spark-submit; ``env`` values and ``conf`` values are never secrets, except
    ``secret_env`` (only for masters whose env stays off the command line)."""

    mode: str  # "env" | "kubernetes-secret" | "file"
    conf: dict[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    needs_secret_env: bool = False
    needs_file: bool = False


@dataclass(frozen=True)
class SparkTarget:
    """The master as the SparkSubmitHook resolved it, and how the hook classified it (its ``_is_yarn``,
    ``_is_kubernetes`` and deploy mode): the same facts that build the spark-submit command."""

    master: str
    provider_yarn: bool
    provider_kubernetes: bool
    deploy_mode: str | None = None

    @property
    def scheme_kubernetes(self) -> bool:
        return self.master.strip().startswith("k8s://")


def delivery_for(target: SparkTarget, kubernetes_secret: str | None = None,
                 credentials_file: str | Path | None = None, force_file: bool = False) -> CredentialDelivery:
    """The delivery for this resolved master; ``credentials_file`` is where the task will write the file."""
    master = target.master.strip()
    if target.provider_kubernetes:
        if not target.scheme_kubernetes:
            raise ValueError(f"master {master!r} is not a k8s:// URL, but the Spark provider treats it as Kubernetes "
                             "(its name contains 'k8s'): it would not pass the credentials to the driver; use a "
                             "master URL or host name without 'k8s', or a k8s:// master")
        if not kubernetes_secret or not SECRET_REF.fullmatch(kubernetes_secret):
            raise ValueError(f"master {master!r}: set copy.kubernetes_credentials_secret to '<secret>:<key>' of a "
                             f"Kubernetes Secret holding the {CONFIGS_ENV} JSON (got {kubernetes_secret!r})")
        return CredentialDelivery("kubernetes-secret", conf={
            f"spark.kubernetes.driver.secretKeyRef.{CONFIGS_ENV}": kubernetes_secret,
            f"spark.kubernetes.executor.secretKeyRef.{CONFIGS_ENV}": kubernetes_secret})
    if target.scheme_kubernetes:  # k8s:// the hook did not recognise: never guess; nothing would be safe to send
        raise ValueError(f"master {master!r}: the Spark provider does not treat it as Kubernetes; refused")
    # YARN to the hook (whatever the URL's scheme) copies env_vars onto the command line: the secret goes in a file.
    # Cluster deploy mode runs the driver elsewhere: the spark-submit process's env would not reach it.
    if target.provider_yarn or target.deploy_mode == "cluster" or force_file:
        if credentials_file is None:
            raise ValueError("file delivery needs the path the credentials file will be written to")
        path = str(credentials_file)
        if Path(path).name != CREDENTIALS_FILE_NAME:
            raise ValueError(f"the credentials file must be named {CREDENTIALS_FILE_NAME} (its name in containers)")
        return CredentialDelivery("file", files=(path,), env={CONFIGS_FILE_ENV: path}, needs_file=True)
    return CredentialDelivery("env", needs_secret_env=True)


def secret_values(configs: dict[str, dict[str, Any]]) -> list[str]:
    """The values of the clusters' configs that must never appear in a command, conf or page (for checks)."""
    marks = ("password", "secret", "sasl.jaas.config", "ssl.key.pem", "token", "credentials")
    return sorted({str(v) for config in configs.values() for k, v in config.items()
                   if any(m in k.lower() for m in marks) and len(str(v)) >= 4})


class InsecureChannelRefused(Permanent, ValueError):
    """A Spark Connect server off the loopback without TLS and a token: both clusters' configs would go in clear."""


def check_connect_url(url: str) -> None:
    """Refuse a Spark Connect URL (``sc://host:port/;use_ssl=true;token=...``) that would send the clusters'
    configs, passwords included, unencrypted or unauthenticated off this machine. Loopback needs neither."""
    parsed = urlparse(url)
    host = (parsed.hostname or "").lower()
    params = dict(part.split("=", 1) for part in parsed.path.lstrip("/").split(";") if "=" in part)
    if _loopback(host):
        return
    missing = [what for what, ok in (("TLS (use_ssl: true in the connection's extra)",
                                      params.get("use_ssl", "").lower() in ("true", "1")),
                                     ("a token (the connection's password)", bool(params.get("token"))))
               if not ok]
    if missing:
        raise InsecureChannelRefused(f"Spark Connect server {host!r} is off the loopback and the connection lacks "
                                     f"{' and '.join(missing)}: both clusters' configs, passwords included, "
                                     "would cross the network in clear; refused")


STANDALONE_SECURITY = ("spark.authenticate", "spark.network.crypto.enabled")


def standalone_hosts(master: str) -> list[str]:
    """The hosts of a ``spark://h1:7077[,h2:7077]`` master (a standalone HA list names several), lowercased."""
    hosts = []
    for part in master.strip()[len("spark://"):].split(","):
        try:
            hosts.append((urlparse(f"spark://{part.strip()}").hostname or "").lower())
        except ValueError:
            hosts.append(part.strip().lower())  # not a host[:port]: never loopback
    return hosts


def check_standalone_master(master: str, conf: Mapping[str, str]) -> None:
    """Refuse a ``spark://`` master with a host off the loopback unless ``conf`` (the Spark conf the job runs with:
    spark-defaults.conf under the task's own) sets both ``spark.authenticate`` and ``spark.network.crypto.enabled``
    to true. Why: both clusters' configs, passwords included, travel in the task closure over Spark's RPC, which is
    neither authenticated nor encrypted unless those are on; any other master is not this check's."""
    if not master.strip().startswith("spark://"):
        return
    remote = [h for h in standalone_hosts(master) if not _loopback(h)]
    if not remote:
        return
    missing = [key for key in STANDALONE_SECURITY if str(conf.get(key, "")).strip().lower() != "true"]
    if missing:
        wanted = " and ".join(f"{key}=true" for key in STANDALONE_SECURITY)
        raise InsecureChannelRefused(
            f"standalone master {master.strip()!r} is off the loopback ({', '.join(remote)}) and the Spark conf lacks "
            f"{' and '.join(missing)}: both clusters' configs, passwords included, would reach its executors in the "
            f"task closure over unauthenticated, unencrypted RPC; set {wanted} (with spark.authenticate.secret) in "
            "spark-defaults.conf or the task's conf, and on the master and workers; refused")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
