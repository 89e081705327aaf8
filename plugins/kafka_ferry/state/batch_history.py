"""The migration's kept batch records (state kind "batch", written by ``copy.batch.finish_batch``), read back.

The one reader of them on the copy path: the window's sizing (``core.batch_window.measured_rate``) learns the
migration's rate from its previous batches here.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_ferry.core.batch_window import MeasuredRate, measured_rate
from kafka_ferry.core.state_records import BATCH_KIND
from kafka_ferry.state.store import MigrationStateStore


def read_batches(store: MigrationStateStore, state: Mapping | None = None) -> list[dict]:
    """Every kept batch record, oldest first (by ``finished_at_ms``); ``state``: an already read ``read_all()``."""
    records = BATCH_KIND.records(state or store.read_all())
    return sorted(records.values(), key=lambda b: b.get("finished_at_ms") or 0)


def migration_rate(store: MigrationStateStore, state: Mapping | None = None) -> MeasuredRate | None:
    """The rate of the migration's recent batches, end to end; None before its first batch copied anything."""
    return measured_rate(read_batches(store, state))
