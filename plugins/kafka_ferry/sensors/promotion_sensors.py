"""Sensors that gate promotion, in poke/reschedule mode or deferrable (then a trigger polls).

Why both: reschedule frees the worker slot between pokes where no triggerer runs; deferrable frees it
entirely. Both modes call the same checks (``promotion.readiness``). A deferrable sensor checks once
before deferring, so a gate that is already open costs no trip through the triggerer.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.promotion import readiness
from kafka_ferry.state.progress import migrated_groups
from kafka_ferry.task_support import MigrationContext, fail_fast
from kafka_ferry.triggers.promotion_triggers import (
    GroupOffsetsSyncedTrigger,
    PromotionCheckTrigger,
    ReplicationLagTrigger,
    SourceGroupsInactiveTrigger,
    SourceQuiescedTrigger,
)


class MigrationSensor(MigrationContext, BaseSensorOperator):
    """A sensor for one migration spec; subclasses give ``check()`` and ``build_trigger()``.

    :param spec_path: path of the migration's YAML spec, read at run time (data, never rendered).
    :param deferrable: wait in the triggerer instead of a worker slot; default: ``[operators] default_deferrable``.
    :param kwargs: passed to ``BaseSensorOperator`` (``poke_interval``, ``timeout``, ``mode``, ...).
    """

    template_fields: Sequence[str] = ()  # spec_path is data, never rendered
    ui_color = "#e8f0d8"

    def __init__(self, *, spec_path: str, deferrable: bool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not spec_path:
            raise ValueError("spec_path is required")
        self.spec_path = spec_path
        self.deferrable = (conf.getboolean("operators", "default_deferrable", fallback=False)
                           if deferrable is None else deferrable)

    @property
    def poke_interval_seconds(self) -> float:
        interval = self.poke_interval
        return interval.total_seconds() if isinstance(interval, timedelta) else float(interval)

    def source_topics(self) -> list[str]:
        return select_topics(self.spec, self.source_cluster.list_topic_names())

    def check(self) -> tuple[bool, dict]:
        raise NotImplementedError

    def build_trigger(self) -> PromotionCheckTrigger:
        raise NotImplementedError

    def poke(self, context: Any) -> PokeReturnValue:
        ready, details = self.check()
        self.log.info("%s: %s %s", self.task_id, "ready" if ready else "not ready", details)
        return PokeReturnValue(is_done=ready, xcom_value=details)

    @fail_fast
    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        ready, details = self.check()
        if ready:
            self.log.info("%s: ready without deferring: %s", self.task_id, details)
            return details
        self.defer(trigger=self.build_trigger(), method_name="execute_complete",
                   timeout=timedelta(seconds=float(self.timeout)) if self.timeout else None)

    def execute_complete(self, context: Any, event: dict) -> dict:
        if event.get("status") != "success":  # a permanent one (e.g. DestinationGroupsAhead) fails once
            error = AirflowFailException if event.get("permanent") else AirflowException
            raise error(f"{self.task_id}: {event.get('message', event)}")
        self.log.info("%s: ready: %s", self.task_id, event.get("details"))
        return event.get("details", {})


class ReplicationLagSensor(MigrationSensor):
    """Max per-partition lag (source end - copied progress) <= ``max_lag`` (default: the spec's).

    :param max_lag: the largest per-partition lag (records) that counts as caught up; default: the spec's
        ``promotion.max_lag_records``.
    :param kwargs: passed to ``MigrationSensor`` (``spec_path``, ``deferrable``) and ``BaseSensorOperator``
        (``poke_interval``, ``timeout``, ``mode``).
    """

    def __init__(self, *, max_lag: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_lag = max_lag

    @property
    def threshold(self) -> int:
        return self.spec.promotion.max_lag_records if self.max_lag is None else int(self.max_lag)

    def check(self) -> tuple[bool, dict]:
        return readiness.check_replication_lag(self.source_cluster, self.state_store, self.source_topics(),
                                               self.threshold)

    def build_trigger(self) -> ReplicationLagTrigger:
        return ReplicationLagTrigger(self.spec.source.connection_id, self.spec.destination.connection_id,
                                     self.spec.state_topic_name, self.source_topics(), self.threshold,
                                     self.poke_interval_seconds)


class SourceQuiescedSensor(MigrationSensor):
    """Source end offsets unchanged for ``window_seconds`` (default: the spec's quiesce window).

    Poke/reschedule mode keeps the first observation in the migration state, so reschedules see it.

    :param window_seconds: how long the source end offsets must stay unchanged; default: the spec's
        ``promotion.quiesce_window_seconds``.
    :param kwargs: passed to ``MigrationSensor`` (``spec_path``, ``deferrable``) and ``BaseSensorOperator``
        (``poke_interval``, ``timeout``, ``mode``).
    """

    def __init__(self, *, window_seconds: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.window_seconds = window_seconds

    @property
    def window(self) -> float:
        return float(self.spec.promotion.quiesce_window_seconds if self.window_seconds is None else self.window_seconds)

    def check(self) -> tuple[bool, dict]:
        return readiness.check_quiesced_persistent(self.source_cluster, self.state_store, self.source_topics(),
                                                   self.window)

    def build_trigger(self) -> SourceQuiescedTrigger:
        return SourceQuiescedTrigger(self.spec.source.connection_id, self.source_topics(), self.window,
                                     self.poke_interval_seconds)


class SourceGroupsInactiveSensor(MigrationSensor):
    """The migrated groups (state kind "group") have no members on the source.

    :param kwargs: passed to ``MigrationSensor`` (``spec_path``, ``deferrable``) and ``BaseSensorOperator``
        (``poke_interval``, ``timeout``, ``mode``).
    """

    def groups(self) -> list[str]:
        return sorted(migrated_groups(self.state_store))

    def check(self) -> tuple[bool, dict]:
        return readiness.check_groups_inactive(self.source_cluster, self.groups())

    def build_trigger(self) -> SourceGroupsInactiveTrigger:
        return SourceGroupsInactiveTrigger(self.spec.source.connection_id, self.groups(),
                                           self.poke_interval_seconds)


class GroupOffsetsSyncedSensor(MigrationSensor):
    """Destination group offsets equal the final translation the promotion recorded.

    :param kwargs: passed to ``MigrationSensor`` (``spec_path``, ``deferrable``) and ``BaseSensorOperator``
        (``poke_interval``, ``timeout``, ``mode``).
    """

    def check(self) -> tuple[bool, dict]:
        return readiness.check_group_offsets_synced(self.destination_cluster, self.state_store, self.spec.name)

    def build_trigger(self) -> GroupOffsetsSyncedTrigger:
        return GroupOffsetsSyncedTrigger(self.spec.destination.connection_id, self.spec.state_topic_name,
                                         self.poke_interval_seconds)
