"""The guard the copy planner calls before copying: it reads the promotion marker (``state.promotion``).

Why a guard: after promotion the destination is the system of record; a copy run would append source
records behind consumers that already moved. Only an explicit ``reset_promotion`` lifts it (for people:
``kafka-ferry reset-promotion <spec>``, which asks for the migration's name first).
"""

from __future__ import annotations

from kafka_ferry.core.dates import iso_utc
from kafka_ferry.core.failures import Permanent
from kafka_ferry.state.promotion import PROMOTED, promotion_status
from kafka_ferry.state.promotion import reset_promotion as reset_promotion  # the command's name for it, kept here
from kafka_ferry.state.store import MigrationStateStore


class MigrationPromotedError(Permanent, RuntimeError):
    """The migration was promoted: copy runs are refused until ``reset_promotion``."""


def assert_not_promoted(store: MigrationStateStore, spec_path: str | None = None) -> None:
    """Raise ``MigrationPromotedError`` if the migration behind ``store`` was promoted; the message gives the date
    (ISO, UTC) and the command that lifts it."""
    status = promotion_status(store)
    if status and status.get("status") == PROMOTED:
        raise MigrationPromotedError(
            f"migration state {store.topic} was promoted at {iso_utc(status.get('promoted_at_ms'))}: copy runs "
            "are refused, the destination is the system of record now. To copy again anyway, reset the promotion "
            f"explicitly: kafka-ferry reset-promotion {spec_path or '<spec file>'}")

