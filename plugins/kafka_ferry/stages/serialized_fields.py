"""The per-topic, per-field registry-serialization decision (`core.serialized_fields`) against live systems.

Computed once per run by `migrate_schemas`, from the source registry's subjects and the spec, and stored in
the state topic (kind `serialized-fields`, one record per source topic); the copy plan, the decode check and
reconciliation read it from there, so all of them apply the same decision: a field is rewritten and checked
only where it was decided to carry the registry wire format.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kafka_ferry.core.serialized_fields import FieldDecision, RecordRewriter, decide_fields
from kafka_ferry.core.spec import SchemaRegistryRef
from kafka_ferry.core.state_records import SERIALIZED_FIELDS_KIND
from kafka_ferry.registry.client import SchemaRegistry

log = logging.getLogger(__name__)


def decide_from_registry(source: SchemaRegistry, settings: SchemaRegistryRef,
                         topics: Mapping[str, str] | list[str]) -> dict[str, FieldDecision]:
    """The decision for each migrated source topic, from the source registry's live subjects."""
    decisions = decide_fields(list(topics), source.subjects(include_deleted=False), settings.field_overrides(),
                              settings.subjects_include, settings.subjects_exclude)
    for decision in decisions.values():
        log.info("registry-serialized fields of %s", decision.describe())
    return decisions


def stored_decisions(store) -> dict[str, FieldDecision]:
    return {topic: FieldDecision.from_record(topic, record)
            for topic, record in store.read_kind(SERIALIZED_FIELDS_KIND).items() if record}


def store_decisions(store, decisions: Mapping[str, FieldDecision], run_id: str) -> int:
    """Store the decisions that differ from the stored ones (a rerun with nothing new writes nothing)."""
    stored = stored_decisions(store)
    changed = {t: {**d.as_record(), "run_id": run_id} for t, d in sorted(decisions.items()) if stored.get(t) != d}
    if changed:
        store.put_many(SERIALIZED_FIELDS_KIND, changed)
    return len(changed)


def fields_by_destination(spec, store) -> dict[str, FieldDecision]:
    """The stored decisions keyed by destination topic (the decode check reads destination records)."""
    rename = spec.topics.rename.destination_topic
    return {rename(topic): decision for topic, decision in stored_decisions(store).items()}


def rewriter_from_store(ids, store) -> RecordRewriter:
    return RecordRewriter(ids, stored_decisions(store))
