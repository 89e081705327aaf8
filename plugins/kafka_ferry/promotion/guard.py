"""The guard the copy planner calls before copying: it reads the promotion marker (``state.promotion``).

Why a guard: after promotion the destination is the system of record; a copy run would append source
records behind consumers that already moved. The way out it names is the rollback (mode ``rollback``, after a look at
``rollback-plan``): it copies back what producers wrote on the destination and clears the mark, so copy runs go on.
It never advises ``reset-promotion``: that drops the records a rollback needs (it refuses while a rollback is
possible unless told the rollback is given up, ``state.promotion.reset_promotion``).
"""

from __future__ import annotations

from kafka_ferry.core.common.dates import iso_utc
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.state.promotion import PROMOTED, promotion_status
from kafka_ferry.state.promotion import reset_promotion as reset_promotion  # the command's name for it, kept here
from kafka_ferry.state.store import MigrationStateStore


class MigrationPromotedError(Permanent, RuntimeError):
    """The migration was promoted: copy runs (and a second promotion) are refused until a rollback."""


def promoted_message(topic: str, promoted_at_ms: int | None, spec_path: str | None = None,
                     refused: str = "copy runs are refused") -> str:
    """Why a promoted migration refuses ``refused``, and the way out that keeps the way back: the rollback."""
    spec = spec_path or "<spec file>"
    return (f"migration state {topic} was promoted at {iso_utc(promoted_at_ms)}: {refused}, the destination is the "
            "system of record now. To go back to the source, run mode 'rollback-plan' to see what a rollback would "
            f"copy back (kafka-ferry rollback-plan {spec}), then mode 'rollback' (kafka-ferry rollback {spec}); "
            "after it, catch-up runs copy again and a new promote starts over")


def assert_not_promoted(store: MigrationStateStore, spec_path: str | None = None,
                        refused: str = "copy runs are refused") -> None:
    """Raise ``MigrationPromotedError`` if the migration behind ``store`` was promoted; the message gives the date
    (ISO, UTC) and names the rollback as the way out."""
    status = promotion_status(store)
    if status and status.get("status") == PROMOTED:
        raise MigrationPromotedError(promoted_message(store.topic, status.get("promoted_at_ms"), spec_path, refused))

