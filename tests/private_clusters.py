"""A source/destination pair of this test session only: brokers the fault tests may kill, SASL_SSL + ACLs.

Ports from KFERRY_PRIVATE_SOURCE_PORT / KFERRY_PRIVATE_DESTINATION_PORT (defaults 21092 / 22092, SASL on port
+ 2), data in KFERRY_PRIVATE_RUN_DIR. Defaults below Linux's ephemeral range (32768-60999), where a local
client's outgoing connection could hold the port at the moment a broker binds it. Never the shared test bed:
restarting a broker there would break every other test running against it. Started by the session fixture,
stopped by pid at its end.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import kafka_testbed as tb

REPO = Path(__file__).resolve().parents[1]
# A JVM start on a busy 2-core machine can take long; a hang still ends here.
READY_TIMEOUT_S = float(os.environ.get("KFERRY_BROKER_READY_S", 180))


def private_clusters(clusters_class: type):
    """The private pair as a `clusters_class` (conftest's `Clusters`) with SASL principals and restarts."""
    run_dir = Path(os.environ.get("KFERRY_PRIVATE_RUN_DIR", REPO / ".testbed" / "private"))
    source_port = int(os.environ.get("KFERRY_PRIVATE_SOURCE_PORT", 21092))
    destination_port = int(os.environ.get("KFERRY_PRIVATE_DESTINATION_PORT", 22092))
    specs = tb.private_clusters(run_dir, source_port, destination_port)

    class PrivateClusters(_PrivateMixin, clusters_class):
        """`Clusters` on the private pair (PLAINTEXT, a super user) plus SASL principals and broker restarts."""

        SOURCE_CONN = "kf_private_source"
        DESTINATION_CONN = "kf_private_destination"

    return PrivateClusters(specs)


def kip848_clusters(clusters_class: type):
    """A private 4.x -> 4.x pair (``kafka_testbed.kip848_clusters``): KIP-848 consumer groups on both sides.

    Ports from KFERRY_KIP848_SOURCE_PORT / KFERRY_KIP848_DESTINATION_PORT (defaults: the private pair's + 50, so each
    engineer's range holds both pairs), data in ``<KFERRY_PRIVATE_RUN_DIR>/kip848``. ``group_protocol``: set it to
    ``"consumer"`` and every consumer the pair hands out that joins a group uses KIP-848's protocol."""
    run_dir = Path(os.environ.get("KFERRY_PRIVATE_RUN_DIR", REPO / ".testbed" / "private")) / "kip848"
    source_port = int(os.environ.get("KFERRY_KIP848_SOURCE_PORT",
                                     int(os.environ.get("KFERRY_PRIVATE_SOURCE_PORT", 21092)) + 50))
    destination_port = int(os.environ.get("KFERRY_KIP848_DESTINATION_PORT",
                                          int(os.environ.get("KFERRY_PRIVATE_DESTINATION_PORT", 22092)) + 50))
    specs = tb.kip848_clusters(run_dir, source_port, destination_port)

    class Kip848Clusters(_PrivateMixin, clusters_class):
        """`Clusters` on the 4.x pair; consumers use ``group_protocol`` once a test sets it."""

        SOURCE_CONN = "kf_kip848_source"
        DESTINATION_CONN = "kf_kip848_destination"
        group_protocol: str | None = None

        def consumer(self, side: str, group_id: str | None = None, **config):
            extra = {"group.protocol": self.group_protocol} if self.group_protocol else {}
            return super().consumer(side, group_id, **{**extra, **config})

    return Kip848Clusters(specs)


class _PrivateMixin:
    if TYPE_CHECKING:  # given by the clusters class this is mixed into (conftest's Clusters)
        from kafka_ferry.kafka.cluster import KafkaCluster

        def unique(self, prefix: str) -> str: ...

        def cluster(self, side: str) -> KafkaCluster: ...

    def __init__(self, specs) -> None:
        self.specs = {"source": specs[0], "destination": specs[1]}
        # cooperative mixin: the next class of the MRO (conftest's clusters) takes the specs; mypy sees object
        super().__init__(SimpleNamespace(SOURCE=specs[0], DESTINATION=specs[1]))  # type: ignore[call-arg]
        self.started: list = []

    # --- lifecycle --------------------------------------------------------------------------------------
    def up(self) -> None:
        try:
            for spec in self.specs.values():
                if tb._running_pid(spec) is None:
                    tb.start(spec)
                    self.started.append(spec)
            for spec in self.specs.values():
                tb.wait_ready(spec, READY_TIMEOUT_S)
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        for spec in self.started:
            tb.stop(spec)
        self.started.clear()

    def restart_broker(self, side: str, before_start=None) -> float:
        """kill -9 the side's broker, start it again; returns seconds until it serves again."""
        spec = self.specs[side]
        tb.kill(spec)
        killed_at = time.monotonic()
        if before_start is not None:
            before_start()
        tb.start(spec)
        tb.wait_ready(spec, READY_TIMEOUT_S)
        if spec not in self.started:
            self.started.append(spec)
        return time.monotonic() - killed_at

    # --- security ---------------------------------------------------------------------------------------
    def create_principal(self, side: str, prefix: str) -> tuple[str, str]:
        """A new SCRAM user on the side (random password); returns (username, password)."""
        from kafka_ferry.kafka.acls import upsert_scram_user

        username = self.unique(prefix)
        password = secrets.token_urlsafe(24)
        upsert_scram_user(self.cluster(side), username, password)
        return username, password

    def sasl_config(self, side: str, username: str, password: str) -> dict:
        return tb.sasl_client_config(self.specs[side], username, password)

    @staticmethod
    def set_connection(conn_id: str, config: dict) -> None:
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps({"conn_type": "kafka", "extra": config})

