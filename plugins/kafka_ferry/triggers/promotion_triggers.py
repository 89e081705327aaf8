"""Triggers behind the deferrable promotion sensors: poll the same checks without blocking the event loop.

Why this shape: the triggerer runs many triggers on one event loop and imports them from the installed
package (never from a DAG bundle). Connections are fetched with ``await aget_connection`` (hooks); every
blocking Kafka call runs in ``asyncio.to_thread``; ``serialize()`` holds only primitives (connection ids,
topic and group names, numbers) so the trigger can be rebuilt anywhere. Clients are created per check
and closed with it, so ``cleanup`` has nothing left to close.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.hooks.kafka_cluster import async_kafka_cluster
from kafka_ferry.promotion import readiness
from kafka_ferry.state.store import MigrationStateStore


class PromotionCheckTrigger(BaseTrigger):
    """Polls ``check()`` every ``poll_interval`` seconds; yields success with its details, or the error.

    :param poll_interval: seconds between two checks while deferred (the sensor's ``poke_interval``).
    :param kwargs: the subclass's arguments, primitives only: they are what ``serialize`` hands the triggerer.
    """

    def __init__(self, poll_interval: float = 10.0, **kwargs: Any) -> None:
        super().__init__()
        self.poll_interval = float(poll_interval)
        self.kwargs = kwargs

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {"poll_interval": self.poll_interval,
                                                                       **self.kwargs}

    async def prepare(self) -> None:
        """Fetch connections (async) before the first check."""

    def check(self) -> tuple[bool, dict]:
        raise NotImplementedError

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            await self.prepare()
            while True:
                ready, details = await asyncio.to_thread(self.check)
                if ready:
                    yield TriggerEvent({"status": "success", "details": details})
                    return
                self.log.info("%s not ready yet: %s", type(self).__name__, details)
                await asyncio.sleep(self.poll_interval)
        except Exception as exc:  # noqa: BLE001 - reported to the sensor, which fails the task with it
            yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}",
                                "permanent": retry_cannot_help(exc)})


class ReplicationLagTrigger(PromotionCheckTrigger):
    """Max per-partition lag (source LSO - copied progress) <= ``max_lag``.

    :param source_conn_id: the source cluster's Kafka connection id.
    :param destination_conn_id: the destination cluster's Kafka connection id (it holds the state topic).
    :param state_topic: the migration's state topic, where the copied progress is read.
    :param topics: the source topics whose lag is measured.
    :param max_lag: the largest per-partition lag (records) that counts as caught up.
    :param poll_interval: seconds between two checks while deferred (the sensor's ``poke_interval``).
    """

    def __init__(self, source_conn_id: str, destination_conn_id: str, state_topic: str, topics: list[str],
                 max_lag: int, poll_interval: float = 10.0) -> None:
        super().__init__(poll_interval, source_conn_id=source_conn_id, destination_conn_id=destination_conn_id,
                         state_topic=state_topic, topics=list(topics), max_lag=int(max_lag))

    async def prepare(self) -> None:
        self._source = await async_kafka_cluster(self.kwargs["source_conn_id"])
        destination = await async_kafka_cluster(self.kwargs["destination_conn_id"])
        self._store = MigrationStateStore(destination, self.kwargs["state_topic"])

    def check(self) -> tuple[bool, dict]:
        return readiness.check_replication_lag(self._source, self._store, self.kwargs["topics"],
                                               self.kwargs["max_lag"])


class SourceQuiescedTrigger(PromotionCheckTrigger):
    """Source end offsets unchanged for ``window_seconds`` (tracked in memory while deferred).

    :param source_conn_id: the source cluster's Kafka connection id.
    :param topics: the source topics whose end offsets are watched.
    :param window_seconds: how long the end offsets must stay unchanged.
    :param poll_interval: seconds between two checks while deferred (the sensor's ``poke_interval``).
    """

    def __init__(self, source_conn_id: str, topics: list[str], window_seconds: float,
                 poll_interval: float = 10.0) -> None:
        super().__init__(poll_interval, source_conn_id=source_conn_id, topics=list(topics),
                         window_seconds=float(window_seconds))
        self._seen: tuple[dict, float] | None = None

    async def prepare(self) -> None:
        self._source = await async_kafka_cluster(self.kwargs["source_conn_id"])

    def check(self) -> tuple[bool, dict]:
        offsets, now = readiness.source_end_offsets(self._source, self.kwargs["topics"]), time.monotonic()
        if self._seen is None or self._seen[0] != offsets:
            self._seen = (offsets, now)
        unchanged = now - self._seen[1]
        return unchanged >= self.kwargs["window_seconds"], {"unchanged_for_s": round(unchanged, 3),
                                                            "window_s": self.kwargs["window_seconds"]}


class SourceGroupsInactiveTrigger(PromotionCheckTrigger):
    """None of ``groups`` has members on the source.

    :param source_conn_id: the source cluster's Kafka connection id.
    :param groups: the migrated consumer groups that must have no members on the source.
    :param poll_interval: seconds between two checks while deferred (the sensor's ``poke_interval``).
    """

    def __init__(self, source_conn_id: str, groups: list[str], poll_interval: float = 10.0) -> None:
        super().__init__(poll_interval, source_conn_id=source_conn_id, groups=list(groups))

    async def prepare(self) -> None:
        self._source = await async_kafka_cluster(self.kwargs["source_conn_id"])

    def check(self) -> tuple[bool, dict]:
        return readiness.check_groups_inactive(self._source, self.kwargs["groups"])


class GroupOffsetsSyncedTrigger(PromotionCheckTrigger):
    """Destination group offsets equal the final translation recorded by the promotion.

    :param destination_conn_id: the destination cluster's Kafka connection id.
    :param state_topic: the migration's state topic, where the promotion recorded the final translation.
    :param poll_interval: seconds between two checks while deferred (the sensor's ``poke_interval``).
    """

    def __init__(self, destination_conn_id: str, state_topic: str, poll_interval: float = 10.0) -> None:
        super().__init__(poll_interval, destination_conn_id=destination_conn_id, state_topic=state_topic)

    async def prepare(self) -> None:
        self._destination = await async_kafka_cluster(self.kwargs["destination_conn_id"])
        self._store = MigrationStateStore(self._destination, self.kwargs["state_topic"])

    def check(self) -> tuple[bool, dict]:
        return readiness.check_group_offsets_synced(self._destination, self._store)
