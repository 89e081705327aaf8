"""Migrate subjects, versions, references and settings between two Schema Registries (before topics exist).

Order of a run: read the source, select subjects, read the destination's state for them, plan
(`core.schemas.schema_plan`), refuse conflicts, probe IMPORT support (preserve), apply the actions one by one, store
the id map. Nothing is written before the plan is known to be conflict-free and, in preserve mode, before the
destination proved it keeps requested ids. Every write is idempotent on rerun: the plan is recomputed from
the destination's state, so a run cut short (registry down) resumes where it stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.schemas.schema_compat import LevelMismatch, global_line, mismatches
from kafka_ferry.core.schemas.schema_plan import (
    Register,
    RegistrySnapshot,
    SchemaPlan,
    SetCompatibility,
    SetMode,
    canonical,
    plan_schemas,
    select_subjects,
)
from kafka_ferry.core.specs.spec import SchemaRegistryRef
from kafka_ferry.registry.protocol import Registry

log = logging.getLogger(__name__)

IMPORT_PROBE_SUBJECT = "_kafka-ferry-import-probe"
PROBE_ID_ATTEMPTS = 50  # free ids looked up above the source ids before giving up the probe


class SchemaMigrationError(Permanent, RuntimeError):
    """The migration cannot proceed; the message names subjects, versions and ids. Nothing was written
    unless the message says so."""


@dataclass
class SchemaMigrationResult:
    mode: str
    dry_run: bool
    subjects: dict[str, str]
    diff: list[str]
    registered: int = 0
    id_map: dict[int, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"mode": self.mode, "dry_run": self.dry_run, "subjects": self.subjects, "diff": self.diff,
                "registered": self.registered, "id_map": {str(k): v for k, v in sorted(self.id_map.items())}}


def plan_migration(source: Registry, destination: Registry, settings: SchemaRegistryRef,
                   topics: Mapping[str, str]) -> tuple[SchemaPlan, Register | None]:
    """Read both registries and plan; `topics` maps each migrated source topic to its destination name.

    Also returns, in preserve mode, a registration whose id is free on the destination (the IMPORT probe).
    """
    source_snapshot = source.snapshot()
    subject_map = select_subjects(source_snapshot.subjects, topics, settings.subjects_include,
                                  settings.subjects_exclude)
    # A first pass against an empty destination names every subject (referenced ones included) and every id.
    everything = plan_schemas(source_snapshot, RegistrySnapshot({}), subject_map, settings.mode, subject_map,
                              settings.include_soft_deleted)
    ids = sorted({r.source_id for r in everything.registrations}) if settings.mode == "preserve" else []
    dst_snapshot = destination.snapshot(sorted(everything.subject_map.values()), ids)
    plan = plan_schemas(source_snapshot, dst_snapshot, subject_map, settings.mode, subject_map,
                        settings.include_soft_deleted, settings.move_global_compatibility)
    plan = replace(plan, notes=(global_line(source_snapshot.compatibility, dst_snapshot.compatibility,
                                            settings.move_global_compatibility),))
    if settings.mode != "preserve" or not (plan.registrations or plan.conflicts):
        return plan, None
    return plan, _import_probe(destination, everything.registrations, dst_snapshot)


def _import_probe(destination: Registry, registrations, dst_snapshot: RegistrySnapshot) -> Register | None:
    """One of the plan's schemas (no references) with an id free on the destination, to test IMPORT with.

    Its own source id when that is free; else the first free id above every source id (a destination that
    already holds the tenant's ids, or other schemas at them, must still be probed: the refusal that
    preserve mode cannot work there is the more basic one, and comes before any conflict).
    """
    plain = [r for r in registrations if not r.references]
    if not plain:
        return None
    for r in plain:
        if r.source_id not in dst_snapshot.schemas_by_id:
            return r
    candidate = max(r.source_id for r in registrations) + 1
    for _ in range(PROBE_ID_ATTEMPTS):
        if destination.schema_by_id(candidate) is None:
            return replace(plain[0], requested_id=candidate)
        candidate += 1
    return None


def migrate_schemas(source: Registry, destination: Registry, settings: SchemaRegistryRef,
                    topics: Mapping[str, str], dry_run: bool = False,
                    store_id_map: Callable[[dict[int, int]], None] | None = None) -> SchemaMigrationResult:
    plan, import_probe = plan_migration(source, destination, settings, topics)
    result = SchemaMigrationResult(settings.mode, dry_run, dict(plan.subject_map), plan.diff_lines(),
                                   id_map=dict(plan.id_map))
    if import_probe is not None and not dry_run:
        check_import_honoured(destination, import_probe)  # the more basic refusal comes first
    if plan.conflicts:
        raise SchemaMigrationError(
            f"{len(plan.conflicts)} conflict(s) between source {source.conn.name!r} and destination "
            f"{destination.conn.name!r}; nothing was written:\n  " + "\n  ".join(str(c) for c in plan.conflicts))
    for line in result.diff:
        log.info("schema plan: %s", line)
    if dry_run:
        return result
    for action in plan.actions:
        if isinstance(action, Register):
            result.id_map[action.source_id] = _register(destination, action)
            result.registered += 1
        elif isinstance(action, SetCompatibility):
            destination.set_compatibility(action.subject, action.level)
        elif isinstance(action, SetMode):
            destination.set_mode(action.subject, action.mode)
    if plan.actions:
        verify_compatibility(source, destination, plan.subject_map)
    if store_id_map is not None:
        store_id_map(result.id_map)
    log.info("schemas: %d version(s) registered, %d id(s) mapped", result.registered, len(result.id_map))
    return result


def compatibility_mismatches(source: Registry, destination: Registry,
                             subject_map: Mapping[str, str]) -> list[LevelMismatch]:
    """The migrated subjects whose effective compatibility differs between the registries, read on both sides."""
    src_levels = {s: source.subject_compatibility(s) for s in subject_map}
    dst_levels = {d: destination.subject_compatibility(d) for d in subject_map.values()}
    return mismatches(src_levels, source.global_compatibility(), dst_levels, destination.global_compatibility(),
                      subject_map)


def verify_compatibility(source: Registry, destination: Registry, subject_map: Mapping[str, str]) -> None:
    """After the writes: every migrated subject enforces on the destination what it enforces on the source."""
    wrong = compatibility_mismatches(source, destination, subject_map)
    if wrong:
        raise SchemaMigrationError(f"{len(wrong)} subject(s) enforce another compatibility on destination "
                                   f"{destination.conn.name!r} than on source {source.conn.name!r} after the "
                                   "migration:\n  " + "\n  ".join(str(w) for w in wrong))


def _register(destination: Registry, action: Register) -> int:
    if action.requested_id is None:
        got = destination.register(action.subject, action.schema, action.schema_type, action.references)
    else:
        got = destination.register_with_id(action.subject, action.version, action.requested_id, action.schema,
                                           action.schema_type, action.references)
        _verify_preserved(destination, action, got)
    if action.soft_delete_after:
        destination.soft_delete(action.subject, action.version)
    return got


def _verify_preserved(destination: Registry, action: Register, got: int) -> None:
    """Preserve means same id and version: check the answer, then read the version back."""
    where = f"subject {action.subject!r} version {action.version}"
    if got != action.requested_id:
        raise SchemaMigrationError(f"{where}: asked for id {action.requested_id}, destination "
                                   f"{destination.conn.name!r} answered id {got}; stopped (earlier versions "
                                   "of this run are registered and a rerun skips them)")
    back = destination.read_subject(action.subject)
    stored = {v.version: v for v in (back.versions if back else ())}.get(action.version)
    if stored is None or stored.schema_id != action.requested_id or (
            canonical(stored.schema, stored.schema_type) != canonical(action.schema, action.schema_type)):
        found = None if stored is None else stored.schema_id
        raise SchemaMigrationError(f"{where}: read back id {found}, expected {action.requested_id}")


def check_import_honoured(destination: Registry, first: Register) -> None:
    """Fail up front when the destination does not keep requested ids (Apicurio accepts IMPORT but ignores it).

    Registers one of the plan's schemas that references nothing, with its source id (free on the destination),
    under a scratch subject, compares the returned id, and deletes the scratch subject permanently either way.
    The tenant's subjects are not touched; on a registry that honours IMPORT the id then holds exactly the
    schema the plan puts there.
    """
    assert first.requested_id is not None  # a preserved action: it asks for its source id
    try:
        destination.set_mode(IMPORT_PROBE_SUBJECT, "IMPORT")
        got = destination.register_with_id(IMPORT_PROBE_SUBJECT, 1, first.requested_id, first.schema,
                                           first.schema_type, ())
    finally:
        destination.set_mode(IMPORT_PROBE_SUBJECT, "READWRITE")
        destination.delete_subject_permanently(IMPORT_PROBE_SUBJECT)
    if got != first.requested_id:
        raise SchemaMigrationError(
            f"preserve mode needs a destination that keeps requested ids (IMPORT mode); destination "
            f"{destination.conn.name!r} ({destination.conn.url}) answered id {got} when asked for id "
            f"{first.requested_id}. Nothing of the migration was written; use mode: remap for this registry.")
