"""The per-topic registry-serialized field decisions (kind ``serialized-fields``) as stored in the state topic.

``migrate_schemas`` stores them once per run; the copy plan, the decode check and reconciliation read them here,
so all of them apply the same decision (the rules are in ``core.schemas.serialized_fields``).
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_ferry.core.common.state_records import SERIALIZED_FIELDS_KIND
from kafka_ferry.core.schemas.schema_wire import SchemaIdRewriter
from kafka_ferry.core.schemas.serialized_fields import FieldDecision, RecordRewriter
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.state.store import MigrationStateStore


def stored_decisions(store: MigrationStateStore) -> dict[str, FieldDecision]:
    return {topic: FieldDecision.from_record(topic, record)
            for topic, record in store.read_kind(SERIALIZED_FIELDS_KIND).items() if record}


def store_decisions(store: MigrationStateStore, decisions: Mapping[str, FieldDecision], run_id: str) -> int:
    """Store the decisions that differ from the stored ones (a rerun with nothing new writes nothing)."""
    stored = stored_decisions(store)
    changed = {t: {**d.as_record(), "run_id": run_id} for t, d in sorted(decisions.items()) if stored.get(t) != d}
    if changed:
        store.put_many(SERIALIZED_FIELDS_KIND, changed)
    return len(changed)


def fields_by_destination(spec: MigrationSpec, store: MigrationStateStore) -> dict[str, FieldDecision]:
    """The stored decisions keyed by destination topic (the decode check reads destination records)."""
    rename = spec.topics.rename.destination_topic
    return {rename(topic): decision for topic, decision in stored_decisions(store).items()}


def rewriter_from_store(ids: SchemaIdRewriter, store: MigrationStateStore) -> RecordRewriter:
    return RecordRewriter(ids, stored_decisions(store))
