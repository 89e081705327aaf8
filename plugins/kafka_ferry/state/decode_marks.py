"""Decode-check marks (kind ``decode-check``) as stored in the state topic: per destination partition, how far the
decode check has read and what it found, so each run checks only what the copy wrote since.

The decode check (``schemas.decode_check``) writes them; promotion reads them to block on a standing fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_ferry.core.common.state_records import DECODE_CHECK_KIND
from kafka_ferry.state.store import MigrationStateStore


def decode_marks(store: MigrationStateStore) -> dict[str, dict[str, Any]]:
    """Every partition's mark, by ``partition_key(topic, partition)``."""
    return store.read_kind(DECODE_CHECK_KIND)


def save_decode_marks(store: MigrationStateStore, marks: Mapping[str, Mapping[str, Any] | None]) -> None:
    store.put_many(DECODE_CHECK_KIND, marks)
