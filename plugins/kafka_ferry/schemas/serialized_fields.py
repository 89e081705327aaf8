"""The per-topic, per-field registry-serialization decision (`core.schemas.serialized_fields`) against live systems.

Computed once per run by `migrate_schemas`, from the source registry's subjects and the spec, and stored in
the state topic (kind `serialized-fields`, one record per source topic); the copy plan, the decode check and
reconciliation read it from there, so all of them apply the same decision: a field is rewritten and checked
only where it was decided to carry the registry wire format.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kafka_ferry.core.schemas.serialized_fields import FieldDecision, decide_fields
from kafka_ferry.core.specs.spec import SchemaRegistryRef
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
