"""The backlog history as stored in the migration's state topic (kind "backlog", one record per catch-up batch).

The one reader and writer of the kind: the copy report task writes a batch's record, the next one reads the
history to measure the rate; the run pages, pre-flight and the dry run read it for their estimates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafka_ferry.core.batches.backlog_eta import RunPoint
from kafka_ferry.core.common.state_records import BACKLOG_KIND, StateSnapshot
from kafka_ferry.state.store import MigrationStateStore


def read_backlog(store: MigrationStateStore, state: StateSnapshot | None = None) -> list[dict[str, Any]]:
    """Every batch's backlog record, oldest first; ``state``: an already read ``read_all()``."""
    records = BACKLOG_KIND.records(state if state is not None else store.read_all())
    return sorted(records.values(), key=lambda r: (r.get("finished_at_ms") or 0, r.get("batch_id", "")))


def run_points(records: Sequence[Mapping[str, Any]]) -> list[RunPoint]:
    """The records as the ETA arithmetic takes them."""
    return [RunPoint(str(r["batch_id"]), int(r["finished_at_ms"] or 0), float(r["duration_s"] or 0),
                     int(r["records_copied"] or 0), int(r["bytes_copied"] or 0), int(r["backlog_before"] or 0),
                     int(r["backlog_after"] or 0), r.get("stop_reason"),
                     # absent from records kept before it was measured: RunPoint.offsets_moved then falls back
                     None if r.get("offsets_progressed") is None else int(r["offsets_progressed"]),
                     None if r.get("planned_at_ms") is None else int(r["planned_at_ms"]))
            for r in records]


def save_backlog(store: MigrationStateStore, record: Mapping[str, Any]) -> None:
    """Keep one batch's backlog record (rewriting it on a retried report task)."""
    store.put(BACKLOG_KIND, str(record["batch_id"]), record)
