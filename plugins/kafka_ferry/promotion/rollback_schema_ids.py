"""Schema ids on the way back: what a rollback of a remap-mode migration does to the keys and values it copies back.

The forward copy rewrote, in the fields decided registry-serialized per topic (`core.schemas.serialized_fields`), source
ids to destination ids. The copy-back rewrites the same fields of the same topics back, with the stored forward map
turned around (`core.schemas.schema_id_reversal`): a record a producer wrote on the destination after the cutover
reaches the source with the source registry's id for its schema, and decodes there to the same value. Other fields, and
topics decided `none`, go back byte for byte.

A destination id the forward map never knew (a schema registered on the destination after the cutover) has no
source id. Decision: the rollback refuses, before the first record is copied, naming every such id (with its
destination subject/version when the registry is at hand) and the first record carrying it; the rollback plan (dry
run, promotion report) lists them the same way. It does not register the schema on the source: the migration owns
none of the source registry's subjects, and a schema it put there would be one nobody asked for; copying the record
with the destination id, or without a rewrite, would put an id on the source that names another schema or none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.schemas.schema_id_reversal import (
    ReverseIdMap,
    UnmappedRecord,
    find_unmapped,
    iter_unmapped,
    reverse_id_map,
)
from kafka_ferry.core.schemas.schema_wire import SchemaIdRewriter
from kafka_ferry.core.schemas.serialized_fields import FieldDecision, RecordRewriter
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.state.schema_ids import stored_id_map
from kafka_ferry.state.serialized_fields import fields_by_destination

# the destination registry's (subject, version, soft-deleted) of an id (`registry.client.SchemaRegistry.versions_of_id`)
VersionsOfId = Callable[[int], list[tuple[str, int, bool]]]
SHOWN = 10  # ids named in an error message; the plan lists them all


class SchemaIdsNotMappedBack(Permanent, RuntimeError):
    """Records to copy back carry destination schema ids the forward map never knew; nothing was copied."""


@dataclass(frozen=True)
class SchemaIdsBack:
    """The copy-back's schema id rewrite for one remap-mode migration."""

    migration: str
    reverse: ReverseIdMap
    decisions: dict[str, FieldDecision]  # by destination topic (the copy-back reads destination records)
    versions_of_id: VersionsOfId | None = None
    rolled_back: str = ""  # what the rollback covers, for its messages (default: the whole migration)

    @classmethod
    def of(cls, spec: MigrationSpec, store, versions_of_id: VersionsOfId | None = None,
           rolled_back: str = "") -> SchemaIdsBack | None:
        """None unless the migration copies in remap mode (preserve mode kept the ids: nothing to map back)."""
        settings = spec.schema_registry
        if settings is None or settings.mode != "remap":
            return None
        return cls(spec.name, reverse_id_map(stored_id_map(store)), fields_by_destination(spec, store),
                   versions_of_id, rolled_back)

    def plan_fields(self, topics: Iterable[str]) -> dict:
        """The copy plan's remap fields (`copy.plan.CopyPlan`) for the copy-back of these destination topics; a
        topic without a decision is refused, never guessed (`FieldsUndecided`)."""
        rewriter = RecordRewriter(self.reverse.rewriter(), self.decisions)
        return {"schema_id_map": {str(d): s for d, s in sorted(self.reverse.to_source.items())},
                "unknown_schema_id_policy": "fail", "serialized_fields": rewriter.fields_by_topic(topics)}

    def normalise(self, topic: str, key: bytes | None, value: bytes | None) -> tuple[bytes | None, bytes | None]:
        """A destination record's key and value as the copy-back writes them on the source (for digests)."""
        rewriter = RecordRewriter(SchemaIdRewriter(self.reverse.to_source, "pass-through"), self.decisions)
        return rewriter.rewrite(topic, key, value)

    def unmapped(self, records: Iterable[tuple[str, int, int, bytes | None, bytes | None]]) -> list[UnmappedRecord]:
        return find_unmapped(records, self.decisions, self.reverse)

    def _subject_versions(self, schema_id: int) -> list[dict] | str:
        if self.versions_of_id is None:
            return "destination registry not consulted"
        try:
            return [{"subject": s, "version": v, "soft_deleted": d} for s, v, d in self.versions_of_id(schema_id)]
        except Exception as exc:  # noqa: BLE001 - only names the id better; the refusal stands without it
            return f"destination registry lookup failed: {exc}"

    def _by_id(self, found: Iterable[UnmappedRecord]) -> list[dict]:
        """One row per unknown id (its count, its first record), read from ``found`` once."""
        rows: dict[int, dict] = {}
        for r in found:
            row = rows.setdefault(r.schema_id, {"schema_id": r.schema_id, "records": 0, "first_record": r.as_dict()})
            row["records"] += 1
        for row in rows.values():
            row["subject_versions"] = self._subject_versions(row["schema_id"])
        return [rows[i] for i in sorted(rows)]

    def plan(self, records: Iterable[tuple[str, int, int, bytes | None, bytes | None]]) -> dict:
        """The rollback plan's schema section: the map used, and the ids that would refuse the rollback. Reads
        ``records`` once, keeping a row per unknown id, never the records (a dry run after days of production)."""
        unmapped = self._by_id(iter_unmapped(records, self.decisions, self.reverse))
        return {"mode": "remap", **self.reverse.as_dict(), "unmapped_ids": unmapped,
                "refused": bool(unmapped),
                "reason": (f"{len(unmapped)} destination schema id(s) the forward map never knew: a rollback now "
                           "refuses before copying anything" if unmapped else
                           "every serialized key and value to copy back carries an id the forward map knows")}

    def refuse_unmapped(self, records: Iterable[tuple[str, int, int, bytes | None, bytes | None]]) -> None:
        """Raise `SchemaIdsNotMappedBack` naming the unknown ids and their first records, if there are any."""
        found = self.unmapped(records)
        if not found:
            return
        rows = self._by_id(found)
        named = []
        for row in rows[:SHOWN]:
            first = row["first_record"]
            versions = row["subject_versions"]
            where = (", ".join(f"subject {v['subject']} version {v['version']}" for v in versions) or "no subject"
                     if isinstance(versions, list) else versions)
            named.append(f"id {row['schema_id']} ({where}; {row['records']} record(s), first "
                         f"{first['topic']}-{first['partition']} at offset {first['offset']}, {first['field']})")
        more = f" and {len(rows) - SHOWN} more id(s)" if len(rows) > SHOWN else ""
        raise SchemaIdsNotMappedBack(
            f"rollback of {self.rolled_back or repr(self.migration)} refused before copying anything: "
            f"{len(found)} record(s) to copy back "
            f"carry destination schema ids the forward schema migration never mapped, so no source id means their "
            f"schema (registered on the destination after the cutover?): {'; '.join(named)}{more}. The rollback "
            "does not register schemas on the source registry (the migration owns none of its subjects); nothing "
            "was copied")
