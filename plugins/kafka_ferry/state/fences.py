"""Fence records (kind ``fence``) as stored in the state topic: which ACL bindings each unit's fence put.

Only what the migration owns is recorded, and a record is written before its ACLs are created, so a lift
(``provision.fences``) always knows what to delete and never deletes a binding it did not put.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafka_ferry.core.common.state_records import FENCE_KIND, StateSnapshot
from kafka_ferry.state.store import MigrationStateStore


def group_fence_key(group: str) -> str:
    return f"GROUP:{group}"


def topic_fence_key(mirror_topic: str) -> str:
    return f"TOPIC:{mirror_topic}"


def recorded_fences(store: MigrationStateStore, state: StateSnapshot | None = None) -> dict[str, dict[str, Any]]:
    """Every fence record, by fence key; ``state``: an already read ``read_all()``."""
    return FENCE_KIND.records(state if state is not None else store.read_all())


def save_fences(store: MigrationStateStore, entries: Mapping[str, Sequence[dict[str, Any]] | None]) -> None:
    """Store each fence's entries (None: the fence is gone)."""
    store.put_many(FENCE_KIND, {key: None if e is None else {"entries": list(e)} for key, e in entries.items()})


def forget_fence(store: MigrationStateStore, key: str) -> None:
    store.put(FENCE_KIND, key, None)
