"""Close a copy batch: measure lag after, build the report, keep it (JSON file + state topic, kind "batch").

Runs in the Spark job's driver after the tasks returned, or in-process for a copy without Spark.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.copy.report import build_report, measure_lag, write_report
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.state.batches import save_batch
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.storage.workdir import StoragePath, as_path


def report_path_for(plan_path: str | Path | StoragePath, plan: CopyPlan) -> StoragePath:
    return as_path(plan_path).with_name(f"report-{plan.batch_id}.json")


def state_clients(configs: Mapping[str, Mapping[str, Any]]) -> KafkaCluster:
    """The destination client a batch closes through, its producer started now: made before the copy, the
    batch record does not wait for a producer id after it (``KafkaCluster.start_durable_producer``)."""
    clients = KafkaCluster("destination", configs["destination"], reuse_producers=True)
    clients.start_durable_producer()
    return clients


class BatchClients:
    """The clients a batch uses beside its engine, each made when first asked for (an empty batch starts no
    producer): ``source`` and ``destination`` (the planned-topic check, the lag after), ``lease`` (the copy lease,
    with its own producer) and ``closing`` (the state producers the batch closes through: ``state_clients``).

    ``given`` clients stand for the configured ones (the unit tests hand in the in-memory fakes)."""

    def __init__(self, configs: Mapping[str, Mapping[str, Any]], **given: Cluster) -> None:
        self.configs = configs
        self.__dict__.update(given)

    @cached_property
    def source(self) -> Cluster:
        return KafkaCluster("source", self.configs["source"])

    @cached_property
    def destination(self) -> Cluster:
        return KafkaCluster("destination", self.configs["destination"])

    @cached_property
    def lease(self) -> Cluster:
        return KafkaCluster("destination", self.configs["destination"])

    @cached_property
    def closing(self) -> Cluster:
        return state_clients(self.configs)


def finish_batch(plan: CopyPlan, results: Iterable[Mapping[str, Any]], configs: Mapping[str, Mapping[str, Any]],
                 started_at_ms: int, report_path: str | Path | StoragePath,
                 destination: Cluster | None = None, source: Cluster | None = None) -> dict[str, Any]:
    source = source or KafkaCluster("source", configs["source"])
    store = MigrationStateStore(destination or KafkaCluster("destination", configs["destination"]), plan.state_topic)
    lag_after = measure_lag(plan, source, store)
    report = build_report(plan, results, lag_after, started_at_ms, int(time.time() * 1000))
    report["report_path"] = str(report_path)
    write_report(report, report_path)
    save_batch(store, report)
    return report
