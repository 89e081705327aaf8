"""Mirror topics as Airflow Assets: the outlets a migration DAG declares, and the events its tasks add.

Why asset aliases as the declared outlets: which topics a migration moves is known only at run time (the spec
selects them by pattern, the cluster's address lives in a Connection that parsing must not read). A task declares
one alias per migration (``kafka-ferry/<migration>/copied`` or ``.../promoted``, a validated name) and adds, through
it, one event per concrete topic Asset ``kafka://<host:port>/<topic>``; Airflow creates the Asset on its first event
and wakes every DAG scheduled on that URI. A topic that got no record in a batch gets no event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import Asset, AssetAlias

from kafka_ferry.core.observability.kafka_assets import (
    copied_alias,
    copy_event_extras,
    promoted_alias,
    promotion_event_extra,
    topic_asset_uri,
)


def topic_asset(bootstrap_servers: str | None, topic: str) -> Asset:
    """The topic's Asset; ``Asset`` runs the Kafka provider's URI sanitizer (``sanitize_uri``) on it."""
    return Asset(uri=topic_asset_uri(bootstrap_servers, topic))


def copy_outlets(migration: str) -> list[AssetAlias]:
    """The outlets of a migration's catch-up copy task."""
    return [AssetAlias(copied_alias(migration))]


def promotion_outlets(migration: str) -> list[AssetAlias]:
    """The outlets of a migration's promotion tasks (the one that marks it promoted, and the staged topics task)."""
    return [AssetAlias(promoted_alias(migration))]


def _alias_events(context: Mapping[str, Any], alias: str):
    events = context.get("outlet_events") if context else None
    if events is None:  # a task run outside Airflow's runner (a unit test, the CLI's own calls): nothing to add to
        return None
    return events[AssetAlias(alias)]


def add_copy_events(context: Mapping[str, Any], migration: str, destination_bootstrap: str | None,
                    report: Mapping[str, Any]) -> dict[str, dict]:
    """One event per destination topic the batch wrote records to; returns asset URI -> extra (also for the log)."""
    extras = copy_event_extras(migration, str(report.get("batch_id") or ""), report.get("partitions") or [])
    events = _alias_events(context, copied_alias(migration))
    out = {}
    for topic, extra in sorted(extras.items()):
        asset = topic_asset(destination_bootstrap, topic)
        if events is not None:
            events.add(asset, extra=extra)
        out[asset.uri] = extra
    return out


def add_promotion_events(context: Mapping[str, Any], migration: str, destination_bootstrap: str | None,
                         promoted: Mapping[str, tuple[str, Mapping[int, tuple[int, int | None]]]], run_id: str,
                         promoted_at_ms: int | None = None) -> dict[str, dict]:
    """One "promoted" event per destination topic; ``promoted``: destination topic -> (source topic, cutover
    offsets per partition)."""
    events = _alias_events(context, promoted_alias(migration))
    out = {}
    for topic, (source_topic, cutover) in sorted(promoted.items()):
        asset = topic_asset(destination_bootstrap, topic)
        extra = promotion_event_extra(migration, source_topic, cutover, run_id, promoted_at_ms)
        if events is not None:
            events.add(asset, extra=extra)
        out[asset.uri] = extra
    return out
