"""An in-memory schema registry for unit tests: ``kafka_ferry.registry.protocol.Registry`` without HTTP.

It answers as the Confluent REST API does where kafka-ferry depends on it (``test_fakes_contract.py`` checks the
same behaviours on the test bed's Apicurio and AxonOps registries):

- registering a schema returns its id; the same schema (same canonical text, type and references) again under the
  same subject returns the same id and adds no version; a new schema adds the next version under a new id, and
  the same schema under another subject keeps its id;
- a soft-deleted version is listed only when deleted ones are asked for; a subject with every version
  soft-deleted is still listed with ``include_deleted``; a permanent delete forgets the subject;
- a subject without a level of its own has compatibility None and follows the global level;
- ``register_with_id`` in IMPORT mode registers the id and version asked for. (Outside IMPORT mode the fake
  refuses it as the Confluent API and AxonOps do; Apicurio accepts it, so kafka-ferry always sets IMPORT first.)
  An id already taken by another schema is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kafka_ferry.core.schemas.schema_decode import RegisteredSchema
from kafka_ferry.core.schemas.schema_forms import canonical
from kafka_ferry.core.schemas.schema_plan import Reference, RegistrySnapshot, SchemaVersion, Subject
from kafka_ferry.registry.client import RegistryConnection, SchemaRegistryUnavailable


@dataclass
class _Subject:
    versions: list[SchemaVersion] = field(default_factory=list)
    compatibility: str | None = None
    mode: str | None = None


class FakeRegistry:
    """One registry in memory; ``global_level`` is the global compatibility (Confluent's default: BACKWARD)."""

    def __init__(self, url: str = "http://fake-registry.invalid", global_level: str | None = "BACKWARD",
                 first_id: int = 1) -> None:
        self.conn = RegistryConnection("fake-registry", url)
        self.global_level = global_level
        self._subjects: dict[str, _Subject] = {}
        self._ids: dict[int, tuple[str, str, tuple[Reference, ...]]] = {}  # id -> (type, text, references)
        self._next_id = first_id

    def _refuse(self, operation: str, status: int) -> SchemaRegistryUnavailable:
        """What the client raises for a 4xx other than 401/403 (``registry.client._unavailable``)."""
        return SchemaRegistryUnavailable(self.conn, operation, f"HTTP {status}")

    def _id_of(self, schema: str, schema_type: str, references: tuple[Reference, ...]) -> int | None:
        form = canonical(schema, schema_type)
        for schema_id, (t, text, refs) in self._ids.items():
            if t == schema_type and canonical(text, t) == form and refs == references:
                return schema_id
        return None

    # --- reads ---------------------------------------------------------------------------------
    def subjects(self, include_deleted: bool = True) -> list[str]:
        return sorted(n for n, s in self._subjects.items()
                      if s.versions and (include_deleted or any(not v.deleted for v in s.versions)))

    def read_subject(self, name: str) -> Subject | None:
        found = self._subjects.get(name)
        if found is None or not found.versions:
            return None
        return Subject(name, tuple(found.versions), found.compatibility, found.mode)

    def subject_compatibility(self, name: str) -> str | None:
        found = self._subjects.get(name)
        return None if found is None else found.compatibility

    def effective_compatibility(self, name: str, global_level: str | None = None) -> str | None:
        own = self.subject_compatibility(name)
        return own if own is not None else (global_level or self.global_compatibility())

    def global_compatibility(self) -> str | None:
        return self.global_level

    def schema_by_id(self, schema_id: int) -> tuple[str, str] | None:
        found = self._ids.get(schema_id)
        return None if found is None else (found[0], found[1])

    def registered_schema(self, schema_id: int) -> RegisteredSchema | None:
        found = self._ids.get(schema_id)
        if found is None:
            return None
        refs: dict[str, RegisteredSchema] = {}
        for ref in found[2]:
            version = next(v for v in self._subjects[ref.subject].versions if v.version == ref.version)
            resolved = self.registered_schema(version.schema_id)
            if resolved is not None:  # a version's id always holds its schema
                refs[ref.name] = resolved
        return RegisteredSchema(found[0], found[1], refs)

    def versions_of_id(self, schema_id: int) -> list[tuple[str, int, bool]]:
        return sorted((v.subject, v.version, v.deleted) for s in self._subjects.values() for v in s.versions
                      if v.schema_id == schema_id)

    def snapshot(self, subjects: list[str] | None = None, ids: list[int] = ()) -> RegistrySnapshot:  # type: ignore[assignment]
        names = self.subjects() if subjects is None else subjects
        read = {n: s for n in names if (s := self.read_subject(n)) is not None}
        by_id = {i: (t, canonical(text, t)) for i in ids if (found := self.schema_by_id(i)) is not None
                 for t, text in [found]}
        return RegistrySnapshot(read, self.global_compatibility(), by_id)

    # --- writes --------------------------------------------------------------------------------
    def register(self, subject: str, schema: str, schema_type: str, references: tuple[Reference, ...]) -> int:
        entry = self._subjects.setdefault(subject, _Subject())
        if entry.mode in ("READONLY", "IMPORT"):
            raise self._refuse(f"register {subject!r}", 422)
        schema_id = self._id_of(schema, schema_type, references)
        live = [v for v in entry.versions if not v.deleted]
        if schema_id is not None and any(v.schema_id == schema_id for v in live):
            return schema_id
        if schema_id is None:
            schema_id = max([self._next_id - 1, *self._ids]) + 1
            self._ids[schema_id] = (schema_type, schema, references)
        number = max((v.version for v in entry.versions), default=0) + 1
        entry.versions.append(SchemaVersion(subject, number, schema_id, schema, schema_type, references))
        return schema_id

    def register_with_id(self, subject: str, version: int, schema_id: int, schema: str, schema_type: str,
                         references: tuple[Reference, ...]) -> int:
        operation = f"register {subject!r} version {version} with id {schema_id}"
        entry = self._subjects.setdefault(subject, _Subject())
        if entry.mode != "IMPORT":
            raise self._refuse(operation, 422)
        taken = self._ids.get(schema_id)
        if taken is not None and self._id_of(schema, schema_type, references) != schema_id:
            raise self._refuse(operation, 422)
        self._ids[schema_id] = (schema_type, schema, references)
        entry.versions = [v for v in entry.versions if v.version != version]
        entry.versions.append(SchemaVersion(subject, version, schema_id, schema, schema_type, references))
        entry.versions.sort(key=lambda v: v.version)
        return schema_id

    def set_mode(self, subject: str, mode: str) -> str:
        self._subjects.setdefault(subject, _Subject()).mode = None if mode == "READWRITE" else mode
        return mode

    def set_compatibility(self, subject: str | None, level: str) -> None:
        if subject is None:
            self.global_level = level
        else:
            self._subjects.setdefault(subject, _Subject()).compatibility = level

    def soft_delete(self, subject: str, version: int) -> None:
        entry = self._subjects.get(subject)
        if entry is None or not any(v.version == version and not v.deleted for v in entry.versions):
            raise self._refuse(f"soft-delete {subject!r} version {version}", 404)
        entry.versions = [replace(v, deleted=True) if v.version == version else v for v in entry.versions]

    def delete_subject_permanently(self, subject: str) -> None:
        self._subjects.pop(subject, None)
