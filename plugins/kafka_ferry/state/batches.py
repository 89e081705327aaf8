"""Batch records (kind ``batch``) as stored in the state topic: one per finished copy batch, its totals and the
path of its full report; the run pages and ``kafka-ferry status`` read them as the migration's lag history, and
the window's sizing (``core.batches.copy_rate.measured_rate``) learns the migration's rate from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_ferry.core.batches.copy_rate import MeasuredRate, measured_rate
from kafka_ferry.core.common.state_records import BATCH_KIND, StateSnapshot
from kafka_ferry.state.store import MigrationStateStore

# The state record keeps totals and gaps; per-partition rows stay in the JSON file (a record has a size cap).
STATE_FIELDS = ("migration", "batch_id", "status", "started_at_ms", "finished_at_ms", "duration_s",
                "partitions_planned", "partitions_copied", "records_copied", "bytes_copied", "records_resumed",
                "records_skipped_loop", "syncs_written", "lag_before_total", "lag_after_total", "gaps",
                # the window and the rate limit (core.batches.batch_window, core.batches.rate_limit): why it stopped, by
                # how much it overran its deadline, how long it waited on the limit
                "stop_reason", "window", "deadline_ms", "overrun_s", "max_bytes_per_second",
                "max_records_per_second", "throttled_s")


def save_batch(store: MigrationStateStore, report: Mapping[str, Any]) -> None:
    """The batch's record from its report (``copy.report.build_report`` plus ``report_path``)."""
    store.put(BATCH_KIND, report["batch_id"],
              {k: report[k] for k in STATE_FIELDS} | {"report_path": report["report_path"]})


def batch_history(store: MigrationStateStore, state: StateSnapshot | None = None) -> list[dict[str, Any]]:
    """Every batch record of the migration (totals, lag before/after), oldest first (by ``finished_at_ms``);
    ``state``: an already read ``store.read_all()``."""
    records = BATCH_KIND.records(state) if state is not None else store.read_kind(BATCH_KIND)
    return sorted(records.values(), key=lambda b: b.get("finished_at_ms") or 0)


def migration_rate(store: MigrationStateStore, state: StateSnapshot | None = None) -> MeasuredRate | None:
    """The rate of the migration's recent busy batches, end to end (``core.batches.copy_rate``); None before the
    first."""
    return measured_rate(batch_history(store, state))
