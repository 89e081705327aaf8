"""Dates for people: ISO 8601 in UTC, from the epoch milliseconds the state and reports keep."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_utc(epoch_ms: int | float | None) -> str:
    """``2026-11-25T09:30:28Z`` for epoch milliseconds (whole seconds); ``unknown`` when there is none."""
    if epoch_ms is None:
        return "unknown"
    return datetime.fromtimestamp(float(epoch_ms) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
