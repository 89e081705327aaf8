"""The `kafka` connection (the apache-kafka provider's type: Extra = librdkafka config) turned into a ``KafkaCluster``.

The provider's hooks build their client from the connection in ``_get_client`` and hand it out through the
``get_conn`` property; this hook does the same with kafka-ferry's one cluster client, named by the
connection id in its errors. Nothing else lives here: every Kafka call is ``KafkaCluster``'s, so the Spark
job, which has no Airflow, runs the same code. The config may hold credentials and is never logged.
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook
from airflow.sdk import BaseHook, Connection

from kafka_ferry.kafka.cluster import KafkaCluster


class KafkaClusterHook(KafkaBaseHook):
    """``KafkaClusterHook(conn_id).get_conn`` is the cluster of that connection.

    :param kafka_config_id: the Airflow connection (type ``kafka``) whose extra holds the librdkafka client config.
    """

    hook_name = "Kafka cluster (kafka-ferry)"

    def __init__(self, kafka_config_id: str = KafkaBaseHook.default_conn_name) -> None:
        super().__init__(kafka_config_id=kafka_config_id)

    def _get_client(self, config: dict[str, Any]) -> KafkaCluster:
        # A task writes state more than once (report, heartbeat, marks): one producer, one producer-id wait.
        return KafkaCluster(self.kafka_config_id, config, reuse_producers=True)


def kafka_cluster(conn_id: str) -> KafkaCluster:
    """The cluster behind an Airflow connection id."""
    return KafkaClusterHook(conn_id).get_conn


async def async_kafka_cluster(conn_id: str) -> KafkaCluster:
    """The cluster behind a connection, for a trigger: the connection is fetched without blocking the event
    loop, and the config (which may resolve callbacks or tokens) is built off the loop."""
    connection = await aget_connection(conn_id)
    return await asyncio.to_thread(cluster_of, connection, conn_id)


def cluster_of(connection: Connection, conn_id: str) -> KafkaCluster:
    """The cluster of a connection already fetched (without blocking, in a trigger; from the metadata DB, in the
    ``kafka-ferry`` command), its config built by the provider's hook as in a task.

    Why a class per call: the provider's ``_build_config`` asks ``get_connection``, a classmethod, for the
    connection; a subclass answering with this one is the typed way to hand it over (assigning a function to the
    hook instance's ``get_connection`` would shadow a classmethod with a differently typed attribute).
    """

    class GivenConnectionHook(KafkaClusterHook):
        @classmethod
        def get_connection(cls, conn_id: str) -> Connection:
            return connection

    return GivenConnectionHook(conn_id).get_conn


async def aget_connection(conn_id: str) -> Connection:
    """``BaseHook.aget_connection``, except where the supervisor channel it needs cannot answer asynchronously.

    Why: ``airflow dags test`` (``dag.test``) runs a deferred task's trigger inline, with an in-process
    supervisor channel that has only the blocking ``send`` (Airflow 3.3). The async lookup asks the metadata DB
    through ``asend``, gets an AttributeError that the secrets chain swallows, and reports
    ``The conn_id '...' isn't defined`` for a connection every task before it read from the same DB; only
    environment-variable connections were found. There the blocking lookup (off the event loop) reaches the DB;
    in the triggerer, whose channel is async, the async lookup is used as Airflow intends.
    """
    from airflow.sdk.execution_time import task_runner

    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    if comms is not None and not hasattr(comms, "asend"):
        return await asyncio.to_thread(BaseHook.get_connection, conn_id)
    return await BaseHook.aget_connection(conn_id)
