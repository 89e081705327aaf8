"""Group activity (kind ``group_activity``) as stored in the state topic: when each source group's committed offsets
last changed, so the group readiness check can tell a quiet group from one whose consumers still commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_ferry.core.common.state_records import GROUP_ACTIVITY_KIND, StateSnapshot
from kafka_ferry.state.store import MigrationStateStore


def group_activity(store: MigrationStateStore, state: StateSnapshot | None = None) -> dict[str, dict[str, Any]]:
    """Every group's last seen fingerprint and change time, by group; ``state``: an already read ``read_all()``."""
    return GROUP_ACTIVITY_KIND.records(state if state is not None else store.read_all())


def save_group_activity(store: MigrationStateStore, changed: Mapping[str, Mapping[str, Any]]) -> None:
    store.put_many(GROUP_ACTIVITY_KIND, changed)
