"""What the stages need of the migration's state store, as a ``Protocol``: ``MigrationStateStore`` (a compacted topic
on the destination cluster) implements it; unit tests run that same store over the in-memory cluster of
``tests/fakes/cluster.py``, and ``tests/integration/test_fakes_contract.py`` checks both answer alike.

The promise every caller relies on: the newest value per key wins, a tombstone (None) deletes the key, a kind no
declaration knows is refused before anything is written, and reading a store that was never written creates nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kafka_ferry.core.common.state_records import StateKind


class StateReader(Protocol):
    """The reads of a state store, without its writes: what a dry run's state as it would be offers too
    (``state.progress.PlannedGroups``), and all that the functions reading recorded units need."""

    topic: str

    def read_all(self) -> dict[StateKind, dict[str, dict[str, Any]]]: ...

    def read_kind(self, kind: StateKind) -> dict[str, dict[str, Any]]: ...


class StateStore(Protocol):
    topic: str

    def put(self, kind: StateKind, key: str, value: Mapping[str, Any] | None) -> None: ...

    def put_many(self, kind: StateKind, values: Mapping[str, Mapping[str, Any] | None]) -> None: ...

    def read_all(self) -> dict[StateKind, dict[str, dict[str, Any]]]: ...

    def read_kind(self, kind: StateKind) -> dict[str, dict[str, Any]]: ...
