"""What the ACL migration did on the destination, as kept in the state topic (kind ``acl-migration``) and shown in the
evidence bundle (``acls-and-fences.json``, field ``acl_migration``).

Why a record: the ACL migration's changes were only in its task log, so a bundle could not say which ACLs the
migration created on the destination, which it found there already, and which it refused (they would have widened
access). And, as for topics, a migration owns only what it creates: the entries listed as ``created`` here are the
only ACLs a later removal may touch; an entry found present (the destination held it before, or an administrator
added it) is counted, never listed as the migration's.

One record per run of the ACL migration, keyed by the run id, written only when the run is not a dry run and it
created an entry or refused another set than the newest record says. So a second run that creates nothing and
refuses the same writes no record (no noise); a retry of the same run merges into that run's record (what an
earlier try created stays listed). ``created`` lists only entries the destination accepted: when a create fails
part way, the entries it did create are recorded and the rest are not.

Record value (every field always present; entries sorted as ``AclEntry`` sorts, refusals by entry)::

    {"run_id": "manual__1", "recorded_at_ms": 1,
     "created": [{"host": "*", "operation": "READ", "pattern_type": "LITERAL", "permission": "ALLOW",
                  "principal": "User:app", "resource_name": "dst.orders", "resource_type": "TOPIC"}],
     "present": 3,
     "refused": [{"entry": {...the same seven fields...}, "reason": "..."}]}

Pure: the stage (``state.acl_migration``) reads and writes the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka_ferry.core.acls.acl_migration import Refusal
from kafka_ferry.core.acls.acl_plan import AclEntry

ENTRY_FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


def entry_row(entry: AclEntry) -> dict[str, str]:
    """An ACL entry as the record and the bundle write it: its seven fields by name."""
    return {name: getattr(entry, name) for name in ENTRY_FIELDS}


def entry_of(row: Mapping[str, Any]) -> AclEntry:
    """An entry read back from a record (a later removal deletes exactly these)."""
    return AclEntry(row["principal"], row["resource_type"], row["resource_name"], row["operation"],
                    row["permission"], row["pattern_type"], row["host"])


def refusal_row(refusal: Refusal) -> dict[str, Any]:
    return {"entry": entry_row(refusal.entry), "reason": refusal.reason}


def newest(records: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The record written last (by ``recorded_at_ms``, then run id), or None."""
    if not records:
        return None
    return records[max(records, key=lambda key: (records[key].get("recorded_at_ms", 0), key))]


def run_record(run_id: str, created: Iterable[AclEntry], present: int, refused: Iterable[Refusal],
               recorded_at_ms: int, records: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The record to write for this run, or None when it would add nothing.

    ``created``: the entries the destination accepted in this try; ``records``: the kind's live records, by run id.
    Nothing is written when this try created nothing and refused what this run's record (or, for a new run, the
    newest record, or none) already says.
    """
    created = sorted(set(created))
    refused_rows = sorted((refusal_row(r) for r in set(refused)), key=lambda row: entry_of(row["entry"]))
    same = records.get(run_id)
    if not created:
        before = same if same is not None else newest(records)
        if (before["refused"] if before is not None else []) == refused_rows:
            return None
    earlier = [entry_of(row) for row in (same or {}).get("created", [])]
    return {"run_id": run_id, "recorded_at_ms": recorded_at_ms,
            "created": [entry_row(e) for e in sorted(set(earlier) | set(created))],
            "present": present, "refused": refused_rows}


def bundle_view(records: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``acl_migration`` in the bundle's ``acls-and-fences.json``: every entry a run created (with its run), the
    present count and the refusals as the newest record says, and every record as written (oldest first). No
    record: the ACL migration never ran outside a dry run, or never created nor refused anything."""
    ordered = sorted(records.values(), key=lambda r: (r.get("recorded_at_ms", 0), r.get("run_id", "")))
    created = sorted(({**row, "run_id": r["run_id"]} for r in ordered for row in r.get("created", [])),
                     key=lambda row: (entry_of(row), row["run_id"]))
    last = ordered[-1] if ordered else {}
    return {"created": created, "present": last.get("present", 0), "refused": list(last.get("refused", [])),
            "runs": [dict(r) for r in ordered]}
