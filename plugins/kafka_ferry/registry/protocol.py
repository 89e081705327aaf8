"""What the stages need of a schema registry, as a ``Protocol``: ``registry.client.SchemaRegistry`` (Confluent's
REST API, through confluent-kafka's client) implements it; unit tests use the in-memory registry of
``tests/fakes/registry.py``, which ``tests/integration/test_fakes_contract.py`` holds to the test bed's registries'
answers (ids, subjects, versions, soft deletes, compatibility levels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kafka_ferry.core.schemas.schema_decode import RegisteredSchema
from kafka_ferry.core.schemas.schema_plan import Reference, RegistrySnapshot, Subject

if TYPE_CHECKING:
    from kafka_ferry.registry.client import RegistryConnection


class Registry(Protocol):
    conn: RegistryConnection  # which registry: its name and URL, for the messages that name it

    def subjects(self, include_deleted: bool = True) -> list[str]: ...

    def read_subject(self, name: str) -> Subject | None: ...

    def subject_compatibility(self, name: str) -> str | None: ...

    def effective_compatibility(self, name: str, global_level: str | None = None) -> str | None: ...

    def global_compatibility(self) -> str | None: ...

    def schema_by_id(self, schema_id: int) -> tuple[str, str] | None: ...

    def registered_schema(self, schema_id: int) -> RegisteredSchema | None: ...

    def versions_of_id(self, schema_id: int) -> list[tuple[str, int, bool]]: ...

    def snapshot(self, subjects: list[str] | None = None, ids: list[int] = ...) -> RegistrySnapshot: ...

    def register(self, subject: str, schema: str, schema_type: str, references: tuple[Reference, ...]) -> int: ...

    def register_with_id(self, subject: str, version: int, schema_id: int, schema: str, schema_type: str,
                         references: tuple[Reference, ...]) -> int: ...

    def set_mode(self, subject: str, mode: str) -> str: ...

    def set_compatibility(self, subject: str | None, level: str) -> None: ...

    def soft_delete(self, subject: str, version: int) -> None: ...

    def delete_subject_permanently(self, subject: str) -> None: ...
