"""Whose fault is a copied record that does not decode on the destination: the migration's, or the source's?

A record that decodes against the source registry (with its source schema id) but not against the
destination's (with the id it carries there) was damaged by the migration: a version left behind (a
soft-deleted one the spec opted out of), an id mapped wrong, a schema registered in another form. No
consumer moved to the destination can read it, so it blocks the run before translation, and promotion,
whatever `decode_check` says. A record that never decoded on the source was copied faithfully: that stays
a report (`decode_check: enforce` can still fail on it).

Invariants (tests assert each):
  A. The source id of a destination payload is the id the copy rewrote it from (remap: the inverse of the
     id map; an id the map does not hold was passed through unchanged), else the id it carries (preserve).
  B. A payload is a migration fault only when it decodes on the source: a payload the source cannot decode
     either is never blamed on the migration.
  C. `blocking` names every partition whose last check found a migration fault, and only those.
  D. `verdict`: a migration fault always fails the run; a record that never decoded fails it only under `enforce`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.schemas.schema_wire import schema_id_of, with_schema_id

MIGRATION_FAULT_FIELD = "migration_fault"  # in a partition's decode-check mark while its fault stands


class MigrationFaultsFound(Permanent, RuntimeError):
    """Copied records decode on the source but not on the destination: the run (or the promotion) stops."""


class DecodeCheckFailed(Permanent, RuntimeError):
    """Copied records do not decode against the destination registry and the spec enforces the decode check."""


class FaultClassifier:
    """`source_id(payload)` when a destination payload that failed decodes on the source, else None.

    `source_check(payload)` is the source registry's verdict on a wire-format payload (`PayloadChecker.check`);
    `id_map` the remap migration's source -> destination ids (None in preserve mode: ids are the same).
    """

    def __init__(self, source_check: Callable[[bytes], Any], id_map: Mapping[int, int] | None = None):
        self._check = source_check
        self._inverse: dict[int, int] = {}
        for src, dst in sorted((id_map or {}).items()):
            self._inverse.setdefault(dst, src)  # ids that map to one destination id hold one schema

    def source_id(self, payload: bytes | None) -> int | None:
        destination_id = schema_id_of(payload)
        if payload is None or destination_id is None:
            return None
        source_id = self._inverse.get(destination_id, destination_id)
        verdict = self._check(with_schema_id(payload, source_id))
        return source_id if getattr(verdict, "outcome", None) == "decoded" else None


def describe(fault: Mapping[str, Any]) -> str:
    """One migration fault: where, the ids, and the source subject and version when known."""
    named = fault.get("source_versions") or []
    versions = ", ".join(f"subject {v[0]!r} version {v[1]}" + (" (soft-deleted on the source)" if v[2] else "")
                         for v in named) or "no subject known"
    return (f"{fault['topic']}-{fault['partition']} offsets {fault['offsets']}: the {fault['field']} carries "
            f"schema id {fault['schema_id']} on the destination (source id {fault['source_id']}, {versions}); "
            f"it decodes on the source, not on the destination: {fault['reason']}")


def blocking(marks: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The standing migration faults recorded in the decode-check marks, one line per partition."""
    return [f"{key}: {mark[MIGRATION_FAULT_FIELD]}" for key, mark in sorted(marks.items())
            if mark and mark.get(MIGRATION_FAULT_FIELD)]


def skip_reason(decode_check: str | None, dry_run: bool,
                promotion_status: Callable[[], Mapping[str, Any] | None]) -> str | None:
    """Why the decode check after a batch does not run, or None when it runs: off (no registry section, or
    ``decode_check: off``), a dry run (checking would move its marks), a promoted migration (the tenant writes to
    the destination now). ``promotion_status`` is asked last, only when the others let the check run."""
    if decode_check is None or decode_check == "off":
        return "decode_check is off"
    if dry_run:
        return "dry run"
    status = promotion_status()
    if status and status.get("status") == "promoted":
        return "promoted"
    return None


def verdict(migration_faults: Sequence[Mapping[str, Any]], failed: int, failures: str,
            decode_check: str) -> MigrationFaultsFound | DecodeCheckFailed | None:
    """The decode check's verdict on a batch, as the failure to raise (None: the run goes on).

    Migration faults block whatever ``decode_check`` says (the migration damaged those records: no consumer moved
    to the destination could read them); records that never decoded on the source fail the run only under
    ``decode_check: enforce`` (``failures``: the report's first failures, described)."""
    if migration_faults:
        return MigrationFaultsFound(
            f"{sum(f['records'] for f in migration_faults)} copied record(s) decode against the source registry but "
            "not against the destination's: the schema migration left their schemas behind; translation and "
            "promotion are blocked until a run finds them decoding. "
            + "; ".join(f["description"] for f in migration_faults[:5]))
    if failed and decode_check == "enforce":
        return DecodeCheckFailed(f"{failed} record(s) copied to the destination do not decode against its registry: "
                                 f"{failures}")
    return None
