"""The promotion marker in the migration state, and the guard the copy planner calls before copying.

Why a guard: after promotion the destination is the system of record; a copy run would append source
records behind consumers that already moved. Only an explicit ``reset_promotion`` lifts it (for people:
``kafka-ferry reset-promotion <spec>``, which asks for the migration's name first).
"""

from __future__ import annotations

from kafka_ferry.core.dates import iso_utc
from kafka_ferry.core.failures import Permanent
from kafka_ferry.core.state_records import MIGRATION_KEY, PROMOTION_KIND
from kafka_ferry.state.store import MigrationStateStore

PROMOTED = "promoted"


class MigrationPromotedError(Permanent, RuntimeError):
    """The migration was promoted: copy runs are refused until ``reset_promotion``."""


def promotion_status(store: MigrationStateStore) -> dict | None:
    return store.read_kind(PROMOTION_KIND).get(MIGRATION_KEY)


def assert_not_promoted(store: MigrationStateStore, spec_path: str | None = None) -> None:
    """Raise ``MigrationPromotedError`` if the migration behind ``store`` was promoted; the message gives the date
    (ISO, UTC) and the command that lifts it."""
    status = promotion_status(store)
    if status and status.get("status") == PROMOTED:
        raise MigrationPromotedError(
            f"migration state {store.topic} was promoted at {iso_utc(status.get('promoted_at_ms'))}: copy runs "
            "are refused, the destination is the system of record now. To copy again anyway, reset the promotion "
            f"explicitly: kafka-ferry reset-promotion {spec_path or '<spec file>'}")


def reset_promotion(store: MigrationStateStore) -> list[str]:
    """Delete every promotion record (marker, steps, translations): a later promotion starts over."""
    keys = sorted(store.read_kind(PROMOTION_KIND))
    if keys:
        store.put_many(PROMOTION_KIND, {k: None for k in keys})
    return keys
