"""The rollback's schema ids: a remap migration's source -> destination id map turned around, and the records whose
ids it cannot turn back.

Why: after a remap cutover, producers on the destination write the destination registry's ids
(`core.schemas.schema_wire`). Copying those records back to the source byte for byte would put ids there that name other
schemas, or none: a source consumer would decode garbage or fail. So the copy-back rewrites bytes 1-4 of the fields the
forward copy rewrote (the same per-topic decisions, `core.schemas.serialized_fields`: a plain binary key stays as it is)
from destination ids to source ids, with the map the forward schema migration stored.

Invariants (checked in `reverse_id_map`, tested in tests/unit/test_schema_id_reversal.py):
  - the reverse map is a function and injective: each destination id turns back into exactly one source id, and two
    destination ids never into the same one (the forward map is a function, so this holds by construction; it is
    checked anyway, since a wrong reverse map corrupts records silently);
  - round trip: for every destination id d, forward[reverse[d]] == d, so a record copied back and forward again
    carries the id it had;
  - shared images are resolved, and said: when the forward map sent several source ids to one destination id (the
    destination registry gave two source schemas one id, i.e. it judged them the same schema), nothing in a
    destination record says which one it was; the lowest source id is chosen, and `shared` lists the others;
  - a destination id outside the map (a schema registered on the destination after the cutover) has no source id:
    `find_unmapped` reports every record carrying one, and the rollback refuses before copying anything rather than
    copying a wrong id.
Pure: no registry, no Kafka here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.schemas.schema_wire import SchemaIdRewriter, schema_id_of
from kafka_ferry.core.schemas.serialized_fields import FieldDecision, FieldsUndecided


class ReverseMapBroken(Retryable, ValueError):
    """The reverse map would break an invariant (never expected: the forward map is a function)."""


@dataclass(frozen=True)
class ReverseIdMap:
    """Destination schema id -> source schema id, for the copy-back of a remap migration."""

    to_source: dict[int, int]
    # destination id -> every source id the forward map sent there, only where there were several (lowest chosen)
    shared: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def source_id(self, destination_id: int) -> int | None:
        return self.to_source.get(destination_id)

    def unknown(self, destination_ids: Iterable[int]) -> list[int]:
        """The ids the map cannot turn back, sorted, each once."""
        return sorted({i for i in destination_ids if i not in self.to_source})

    def rewriter(self) -> SchemaIdRewriter:
        """The wire-format rewrite the copy-back applies: `fail` on an unknown id whatever the forward policy was
        (an id passed through would name another schema on the source, or none)."""
        return SchemaIdRewriter(self.to_source, "fail")

    def as_dict(self) -> dict[str, Any]:
        return {"destination_to_source": {str(d): s for d, s in sorted(self.to_source.items())},
                "shared": {str(d): list(s) for d, s in sorted(self.shared.items())}}


def reverse_id_map(forward: Mapping[int, int]) -> ReverseIdMap:
    """The reverse of the forward (source -> destination) id map, with its invariants checked."""
    images: dict[int, list[int]] = {}
    for source_id, destination_id in forward.items():
        images.setdefault(int(destination_id), []).append(int(source_id))
    # Several source ids on one destination id: the destination registry stored them as one schema, so any of them
    # decodes a destination record the same; the lowest is chosen so every rollback chooses the same.
    to_source = {d: min(sources) for d, sources in images.items()}
    shared = {d: tuple(sorted(sources)) for d, sources in images.items() if len(sources) > 1}
    if len(set(to_source.values())) != len(to_source):
        raise ReverseMapBroken("two destination schema ids turn back into one source id")
    broken = sorted(d for d, s in to_source.items() if int(forward[s]) != d)
    if broken:
        raise ReverseMapBroken(f"destination schema id(s) {broken} do not round-trip through the forward map")
    return ReverseIdMap(to_source, shared)


@dataclass(frozen=True)
class UnmappedRecord:
    """A destination record whose serialized key or value carries an id the reverse map lacks."""

    topic: str
    partition: int
    offset: int
    field: str  # "key" | "value"
    schema_id: int

    def describe(self) -> str:
        return (f"{self.topic}-{self.partition} at offset {self.offset}: the {self.field} carries destination schema "
                f"id {self.schema_id}, which the forward schema migration never mapped")

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset, "field": self.field,
                "schema_id": self.schema_id}


def find_unmapped(records: Iterable[tuple[str, int, int, bytes | None, bytes | None]],
                  decisions: Mapping[str, FieldDecision], reverse: ReverseIdMap) -> list[UnmappedRecord]:
    """Every (topic, partition, offset, key, value) whose serialized field (per the topic's decision, keyed by the
    topic the records are read from) carries an id outside ``reverse``. Fields not decided serialized are never
    looked at: their bytes 1-4 are data, not an id. A topic without a decision is refused (`FieldsUndecided`), never
    guessed, as the forward copy refuses it."""
    return list(iter_unmapped(records, decisions, reverse))


def iter_unmapped(records: Iterable[tuple[str, int, int, bytes | None, bytes | None]],
                  decisions: Mapping[str, FieldDecision], reverse: ReverseIdMap) -> Iterator[UnmappedRecord]:
    """``find_unmapped`` one record at a time, for a caller that keeps only a summary of them."""
    for topic, partition, offset, key, value in records:
        decision = decisions.get(topic)
        if decision is None:
            raise FieldsUndecided(f"topic {topic!r} has no registry-serialization decision (key/value): its schema "
                                  "ids cannot be mapped back; run migrate_schemas again, or add a "
                                  "schema_registry.serialized_fields rule for it")
        for name, wanted, payload in (("key", decision.key, key), ("value", decision.value, value)):
            schema_id = schema_id_of(payload) if wanted else None
            if schema_id is not None and reverse.source_id(schema_id) is None:
                yield UnmappedRecord(topic, partition, offset, name, schema_id)
