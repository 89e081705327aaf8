"""How the copy job gets both clusters' client configs without a secret on any command line, per Spark master.

- local[*] and spark:// (client mode): the spark-submit process's environment (``KFERRY_CLUSTER_CONFIGS``),
  set by the task at run time; executors get the configs in the task closure.
- k8s://: the driver and executor pods read ``KFERRY_CLUSTER_CONFIGS`` from a Kubernetes Secret
  (``spark.kubernetes.{driver,executor}.secretKeyRef``); the Airflow worker never holds the value.
- yarn (and any master when asked): a credentials file, mode 0600 in a directory of its own, shipped with
  ``--files`` and named by ``KFERRY_CLUSTER_CONFIGS_FILE`` (a path, not a secret); removed after the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kafka_ferry.core.patterns import SECRET_REF  # <Secret name>:<key>

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


def delivery_for(master: str, kubernetes_secret: str | None = None, credentials_file: str | Path | None = None,
                 force_file: bool = False) -> CredentialDelivery:
    """The delivery for this master; ``credentials_file`` is where the task will write the file (file mode)."""
    master = master.strip()
    if master.startswith("k8s://"):
        if not kubernetes_secret or not SECRET_REF.fullmatch(kubernetes_secret):
            raise ValueError(f"master {master!r}: set copy.kubernetes_credentials_secret to '<secret>:<key>' of a "
                             f"Kubernetes Secret holding the {CONFIGS_ENV} JSON (got {kubernetes_secret!r})")
        return CredentialDelivery("kubernetes-secret", conf={
            f"spark.kubernetes.driver.secretKeyRef.{CONFIGS_ENV}": kubernetes_secret,
            f"spark.kubernetes.executor.secretKeyRef.{CONFIGS_ENV}": kubernetes_secret})
    if master.startswith("yarn") or force_file:
        if credentials_file is None:
            raise ValueError("file delivery needs the path the credentials file will be written to")
        path = str(credentials_file)
        if Path(path).name != CREDENTIALS_FILE_NAME:
            raise ValueError(f"the credentials file must be named {CREDENTIALS_FILE_NAME} (its name in containers)")
        return CredentialDelivery("file", files=(path,), env={CONFIGS_FILE_ENV: path}, needs_file=True)
    return CredentialDelivery("env", needs_secret_env=True)
