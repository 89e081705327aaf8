"""Plan a schema migration: from a source registry's subjects and the destination's, the writes in order.

Inputs are snapshots (plain data read by the registry client); the output is a `SchemaPlan`: the actions in
an order the destination accepts, the conflicts that forbid running it, and the source → destination id map.

Invariants the plan keeps (tests assert each):
  A. A version is registered after every version it references and after the earlier versions of its own
     subject, so the destination resolves every reference and numbers versions like the source.
  B. A version already on the destination with the same canonical schema is not registered again: a rerun of
     a completed migration plans no write at all.
  C. Any conflict (same subject and version with another schema; in preserve mode an id the destination uses
     for another schema) is reported and the plan holds no write — the caller refuses before writing.
  D. preserve: every registration asks for the source id and version; remap: the destination assigns ids and
     the id map is filled from what it returns (ids already there are in the map up front).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.schemas.protobuf_schema import UnrenderableDescriptor
from kafka_ferry.core.schemas.schema_forms import canonical as canonical  # schemas.schemas compares forms through it
from kafka_ferry.core.schemas.schema_forms import registrable_text
from kafka_ferry.core.specs.patterns import any_full_match

MigrationMode = Literal["preserve", "remap"]


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class SchemaVersion:
    subject: str
    version: int
    schema_id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    deleted: bool = False


@dataclass(frozen=True)
class Subject:
    name: str
    versions: tuple[SchemaVersion, ...]
    compatibility: str | None = None  # None: the subject follows the global level
    mode: str | None = None


@dataclass(frozen=True)
class RegistrySnapshot:
    subjects: Mapping[str, Subject]
    compatibility: str | None = None
    # id -> (schema type, canonical schema) for the ids a preserve migration asks for (destination side).
    schemas_by_id: Mapping[int, tuple[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Register:
    subject: str  # destination subject
    version: int  # source version number (preserve keeps it; remap lets the destination number it)
    source_id: int
    schema: str
    schema_type: str
    references: tuple[Reference, ...]  # destination subjects and versions
    requested_id: int | None  # preserve: the source id; remap: None
    soft_delete_after: bool = False


@dataclass(frozen=True)
class SetCompatibility:
    subject: str | None  # None: the global level
    level: str


@dataclass(frozen=True)
class SetMode:
    subject: str
    mode: str


Action = Register | SetCompatibility | SetMode


@dataclass(frozen=True)
class Conflict:
    subject: str
    version: int
    source_id: int
    destination_id: int | None
    reason: str

    def __str__(self) -> str:
        return (f"subject {self.subject!r} version {self.version}: source id {self.source_id}, "
                f"destination id {self.destination_id}: {self.reason}")


@dataclass(frozen=True)
class SchemaPlan:
    mode: MigrationMode
    actions: tuple[Action, ...]
    conflicts: tuple[Conflict, ...]
    id_map: Mapping[int, int]  # known before running: versions already on the destination
    subject_map: Mapping[str, str]
    notes: tuple[str, ...] = ()  # what the plan leaves alone and why (the global level), shown with the diff

    @property
    def registrations(self) -> tuple[Register, ...]:
        return tuple(a for a in self.actions if isinstance(a, Register))

    def diff_lines(self) -> list[str]:
        """What a run would do, one line per action (the dry-run output)."""
        lines = [f"CONFLICT {c}" for c in self.conflicts]
        lines += [f"note: {n}" for n in self.notes] if (self.actions or self.conflicts) else []
        for a in self.actions:
            if isinstance(a, Register):
                ident = f"id {a.requested_id}" if a.requested_id is not None else f"new id (source {a.source_id})"
                deleted = " then soft-delete" if a.soft_delete_after else ""
                lines.append(f"register {a.subject} v{a.version} {a.schema_type} {ident}{deleted}")
            elif isinstance(a, SetCompatibility):
                lines.append(f"compatibility {a.subject or '<global>'} = {a.level}")
            else:
                lines.append(f"mode {a.subject} = {a.mode}")
        return lines


class SchemaPlanError(Retryable, ValueError):
    """The source itself cannot be migrated as asked (a reference cycle, a reference to a missing version)."""


def _same(a: SchemaVersion, b: SchemaVersion, subject_map: Mapping[str, str]) -> bool:
    refs_a = tuple((r.name, subject_map.get(r.subject, r.subject)) for r in a.references)
    refs_b = tuple((r.name, r.subject) for r in b.references)
    return (a.schema_type == b.schema_type and canonical(a.schema, a.schema_type) == canonical(b.schema, b.schema_type)
            and refs_a == refs_b)


def _ordered(versions: Mapping[tuple[str, int], SchemaVersion]) -> list[SchemaVersion]:
    """Invariant A: a topological order of versions, ties broken by (subject, version) for determinism."""
    deps: dict[tuple[str, int], set[tuple[str, int]]] = {k: set() for k in versions}
    by_subject: dict[str, list[int]] = {}
    for subject, number in sorted(versions):
        by_subject.setdefault(subject, []).append(number)
    for subject, numbers in by_subject.items():
        for earlier, later in zip(numbers, numbers[1:], strict=False):
            deps[(subject, later)].add((subject, earlier))
    for key, v in versions.items():
        for ref in v.references:
            target = (ref.subject, ref.version)
            if target not in versions:
                raise SchemaPlanError(f"subject {key[0]!r} version {key[1]} references {ref.subject!r} "
                                      f"version {ref.version}, which is not among the versions to migrate")
            deps[key].add(target)
    users: dict[tuple[str, int], list[tuple[str, int]]] = {k: [] for k in versions}
    for key, needs in deps.items():
        for need in needs:
            users[need].append(key)
    waiting = {k: len(n) for k, n in deps.items()}
    ready = [k for k, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        key = heapq.heappop(ready)
        order.append(versions[key])
        for user in users[key]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != len(versions):
        stuck = sorted(k for k, n in waiting.items() if n)
        raise SchemaPlanError(f"reference cycle among {stuck}")
    return order


def select_versions(source: RegistrySnapshot, subjects: Iterable[str], include_deleted: bool
                    ) -> dict[tuple[str, int], SchemaVersion]:
    """The versions of the chosen subjects, plus the subjects they reference (transitively)."""
    chosen: dict[tuple[str, int], SchemaVersion] = {}
    pending = [v for s in sorted(subjects) for v in source.subjects[s].versions if include_deleted or not v.deleted]
    while pending:
        v = pending.pop()
        if (v.subject, v.version) in chosen:
            continue
        chosen[(v.subject, v.version)] = v
        for ref in v.references:
            target = source.subjects.get(ref.subject)
            match = [r for r in (target.versions if target else ()) if r.version == ref.version]
            if not match:
                raise SchemaPlanError(f"subject {v.subject!r} version {v.version} references {ref.subject!r} "
                                      f"version {ref.version}, which the source registry does not have")
            # A referenced subject comes whole (its live history), and the referenced version even if soft-deleted.
            pending.append(match[0])
            pending.extend(r for r in (target.versions if target else ()) if include_deleted or not r.deleted)
    return chosen


def plan_schemas(source: RegistrySnapshot, destination: RegistrySnapshot, subjects: Iterable[str],
                 mode: MigrationMode, subject_map: Mapping[str, str] | None = None,
                 include_deleted: bool = False, move_global: bool = False) -> SchemaPlan:
    """The ordered actions migrating `subjects` (source names) and what they reference."""
    versions = select_versions(source, subjects, include_deleted)
    names = {s for s, _ in versions}
    smap = {s: (subject_map or {}).get(s, s) for s in sorted(names)}
    conflicts: list[Conflict] = []
    id_map: dict[int, int] = {}
    version_map: dict[tuple[str, int], int] = {}  # source (subject, version) -> destination version
    registrations: list[Register] = []
    next_version: dict[str, int] = {}
    history: dict[str, list[SchemaVersion]] = {}  # per subject, its earlier versions (invariant A orders them)
    for v in _ordered(versions):
        earlier = history.setdefault(v.subject, [])
        # e.g. .proto text, then the serializer's descriptor of the same schema: a registry keeps it once
        twin = next((w for w in earlier if _same(w, v, smap)), None) if mode == "preserve" else None
        earlier.append(v)
        dst_subject = smap[v.subject]
        existing = destination.subjects.get(dst_subject)
        dst_versions = {d.version: d for d in (existing.versions if existing else ())}
        if mode == "preserve":
            dst_number = v.version
        else:
            dst_number = next_version.get(dst_subject, 1)
            next_version[dst_subject] = dst_number + 1
        version_map[(v.subject, v.version)] = dst_number
        there = dst_versions.get(dst_number)
        if there is not None:
            if _same(v, there, smap) and (mode == "remap" or there.schema_id == v.schema_id):
                id_map.setdefault(v.schema_id, there.schema_id)
                continue
            reason = ("another schema is registered under this version" if not _same(v, there, smap)
                      else "same schema but another id; preserve needs the source id")
            conflicts.append(Conflict(dst_subject, dst_number, v.schema_id, there.schema_id, reason))
            continue
        if mode == "preserve":
            if twin is not None:
                conflicts.append(Conflict(dst_subject, dst_number, v.schema_id, None,
                                          f"the same schema as version {twin.version} (id {twin.schema_id}) in "
                                          "another form: a registry keeps it once, so preserve cannot keep both ids; "
                                          "use remap mode (both ids map to one)"))
                continue
            taken = destination.schemas_by_id.get(v.schema_id)
            if taken is not None and taken != (v.schema_type, canonical(v.schema, v.schema_type)):
                conflicts.append(Conflict(dst_subject, dst_number, v.schema_id, v.schema_id,
                                          "the destination uses this id for another schema"))
                continue
        refs = tuple(Reference(r.name, smap[r.subject], version_map[(r.subject, r.version)]) for r in v.references)
        registrations.append(Register(dst_subject, dst_number, v.schema_id, _registrable(v), v.schema_type, refs,
                                      v.schema_id if mode == "preserve" else None, soft_delete_after=v.deleted))
    if conflicts:
        return SchemaPlan(mode, (), tuple(conflicts), id_map, smap)
    return SchemaPlan(mode, _with_settings(source, destination, smap, registrations, mode, move_global), (), id_map,
                      smap)


def _registrable(v: SchemaVersion) -> str:
    try:
        return registrable_text(v.schema, v.schema_type)
    except UnrenderableDescriptor as exc:
        raise SchemaPlanError(f"subject {v.subject!r} version {v.version} (id {v.schema_id}) is stored as a serialized "
                              f"Protobuf descriptor that cannot be written as .proto text ({exc}); exclude the "
                              "subject, or register that version as .proto text on the source") from None


def _with_settings(source: RegistrySnapshot, destination: RegistrySnapshot, smap: Mapping[str, str],
                   registrations: list[Register], mode: MigrationMode, move_global: bool = False
                   ) -> tuple[Action, ...]:
    """Registrations wrapped with the mode and compatibility writes, each only when it changes something.

    Subjects being written are put in IMPORT (preserve) and compatibility NONE while their history is
    replayed (old versions need not be compatible under today's level), then get the source's settings.
    The destination's global level is the destination's: it moves only when the spec asks (`move_global`).
    Every migrated subject ends with the source's *effective* level (its own, else the source's global
    level): a subject following the global level gets that level as its own when the destination's global
    level differs, or when the replay had set NONE on it.
    """
    touched = sorted({r.subject for r in registrations})
    before: list[Action] = []
    after: list[Action] = []
    destination_global = destination.compatibility
    if move_global and source.compatibility and source.compatibility != destination.compatibility:
        after.append(SetCompatibility(None, source.compatibility))
        destination_global = source.compatibility
    reverse = {dst: src for src, dst in smap.items()}
    for dst_subject in sorted(smap.values()):
        src = source.subjects[reverse[dst_subject]]
        dst = destination.subjects.get(dst_subject)
        if dst_subject in touched:
            if mode == "preserve":
                before.append(SetMode(dst_subject, "IMPORT"))
                after.append(SetMode(dst_subject, src.mode or "READWRITE"))
            before.append(SetCompatibility(dst_subject, "NONE"))
        level = src.compatibility or source.compatibility
        there = (dst.compatibility if dst else None) or destination_global
        if level and (dst_subject in touched or there != level):
            after.append(SetCompatibility(dst_subject, level))
        restore_mode = src.mode and src.mode != "READWRITE" and (dst.mode if dst else None) != src.mode
        if dst_subject not in touched and restore_mode and src.mode:
            after.append(SetMode(dst_subject, src.mode))
    return (*before, *registrations, *after)


def select_subjects(source_subjects: Iterable[str], topics: Mapping[str, str], include: Iterable[str] = (),
                    exclude: Iterable[str] = ()) -> dict[str, str]:
    """Source subject -> destination subject for the migrated topics (source -> destination topic name).

    TopicNameStrategy subjects `<topic>-key`/`<topic>-value` follow their topic's rename; subjects matching
    an include regex (RecordNameStrategy and the like) keep their name. Excludes win over both.
    """
    include, exclude = tuple(include), tuple(exclude)
    chosen: dict[str, str] = {}
    for subject in source_subjects:
        if any_full_match(exclude, subject):  # RE2: linear in the subject's length
            continue
        topic, _, suffix = subject.rpartition("-")
        if suffix in ("key", "value") and topic in topics:
            chosen[subject] = f"{topics[topic]}-{suffix}"
        elif any_full_match(include, subject):
            chosen[subject] = subject
    return chosen
