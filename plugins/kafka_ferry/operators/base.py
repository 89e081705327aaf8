"""What every kafka-ferry operator shares: the spec it works for and hooks onto both clusters."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from airflow.sdk import BaseHook, BaseOperator

from kafka_ferry.core.spec import MigrationSpec, check_connections, load_spec
from kafka_ferry.hooks.kafka_cluster import KafkaClusterHook
from kafka_ferry.io.state_store import MigrationStateStore


class MigrationContext:
    """The spec (a YAML path, re-read at run time) and the hooks and state of the migration it names.

    Shared by operators and sensors; clients are created lazily, on first use in the task.
    """

    spec_path: str

    @cached_property
    def spec(self) -> MigrationSpec:
        return load_spec(self.spec_path)

    @cached_property
    def source_hook(self) -> KafkaClusterHook:
        return KafkaClusterHook(self.spec.source.connection_id)

    @cached_property
    def destination_hook(self) -> KafkaClusterHook:
        return KafkaClusterHook(self.spec.destination.connection_id)

    @cached_property
    def state_store(self) -> MigrationStateStore:
        return MigrationStateStore(self.destination_hook, self.spec.state_topic_name)


class MigrationOperator(MigrationContext, BaseOperator):
    """Base for operators that act for one migration spec."""

    template_fields: Sequence[str] = ("spec_path",)
    ui_color = "#d8e8f8"

    def __init__(self, *, spec_path: str, **kwargs) -> None:
        super().__init__(**kwargs)
        if not spec_path:
            raise ValueError("spec_path is required")
        self.spec_path = spec_path

    def check_connections_exist(self) -> None:
        """Fail, naming the spec field, before anything changes when a connection id is unknown."""
        known = set()
        for conn_id in self._referenced_connection_ids():
            try:
                BaseHook.get_connection(conn_id)
                known.add(conn_id)
            except Exception:  # noqa: BLE001 - Airflow raises different types per secrets backend
                pass
        check_connections(self.spec, self.spec_path, known)

    def _referenced_connection_ids(self) -> set[str]:
        spec = self.spec
        ids = {spec.source.connection_id, spec.destination.connection_id, spec.copy_settings.spark_connection_id}
        if spec.schema_registry:
            ids |= {spec.schema_registry.source_connection_id, spec.schema_registry.destination_connection_id}
        return ids
