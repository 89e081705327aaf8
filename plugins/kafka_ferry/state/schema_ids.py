"""The source -> destination schema id map (kind ``schema_id``) as stored in the state topic, and the record
rewriter the copy builds from it.

``migrate_schemas`` stores the map; the copy, the final copy, reconciliation and the decode check read it here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafka_ferry.core.common.state_records import SCHEMA_ID_KIND
from kafka_ferry.core.schemas.schema_wire import SchemaIdRewriter
from kafka_ferry.core.schemas.serialized_fields import RecordRewriter
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.state.serialized_fields import rewriter_from_store
from kafka_ferry.state.store import MigrationStateStore

log = logging.getLogger(__name__)


def stored_id_map(store: MigrationStateStore) -> dict[int, int]:
    """The source -> destination schema ids `migrate_schemas` stored in the state topic (empty before it ran)."""
    return {int(k): int(v["destination_id"]) for k, v in store.read_kind(SCHEMA_ID_KIND).items() if v}


def id_map_storer(store: MigrationStateStore, mode: str, run_id: str) -> Callable[[dict[int, int]], None]:
    """What `migrate_schemas` calls with the finished id map: stores only the entries the state topic lacks or
    holds differently, so a complete rerun writes nothing."""
    stored = stored_id_map(store)

    def store_ids(id_map: dict[int, int]) -> None:
        changed = {src: dst for src, dst in id_map.items() if stored.get(src) != dst}
        if changed:
            store.put_many(SCHEMA_ID_KIND, {str(src): {"destination_id": dst, "mode": mode, "run_id": run_id}
                                            for src, dst in sorted(changed.items())})
        log.info("schema id map: %d id(s), %d newly stored", len(id_map), len(changed))

    return store_ids


def record_rewriter(spec: MigrationSpec, store: MigrationStateStore) -> RecordRewriter | None:
    """How copied keys and values get their destination schema ids: only in remap mode (preserve keeps ids),
    and only in the fields decided registry-serialized per topic (`state.serialized_fields`).

    None means records are copied byte for byte. In remap mode the stored map is used as it is, even empty
    (a source registry with no schemas): with `unknown_id_policy: fail` a record whose serialized field
    carries an id the map lacks stops the copy naming it, rather than reaching the destination with an id
    that means nothing there.
    """
    settings = spec.schema_registry
    if settings is None or settings.mode != "remap":
        return None
    return rewriter_from_store(SchemaIdRewriter(stored_id_map(store), settings.unknown_id_policy), store)
