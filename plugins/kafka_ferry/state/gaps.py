"""The gap ledger (kind ``gap``) in the state topic: each range of source offsets lost to retention that the spec
accepted, written by the planner before anything of that batch is copied, so the loss is on record even if the
batch then fails.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict

from kafka_ferry.core.batches.batch_planning import RetentionGap
from kafka_ferry.core.common.state_records import GAP_KIND, gap_key
from kafka_ferry.state.store import MigrationStateStore


def save_gaps(store: MigrationStateStore, gaps: Iterable[RetentionGap], batch_id: str, now_ms: int) -> None:
    """One record per lost range start (idempotent: a later, wider loss of the same range replaces it)."""
    store.put_many(GAP_KIND, {
        gap_key(g.topic, g.partition, g.lost_start):
            {**asdict(g), "lost_count": g.lost_count, "batch_id": batch_id, "recorded_at_ms": now_ms}
        for g in gaps})
