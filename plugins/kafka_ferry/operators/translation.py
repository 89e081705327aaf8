"""Catch-up translation after each copy batch: translate, checkpoint, export the offset map.

Why not commit by default: like MM2's ``sync.group.offsets.enabled`` (off by default), committing to
destination groups during catch-up is opt-in; promotion always commits. Decisions are logged with their
reasons; flagged ones (clamped beyond the copy, not translated) are warnings and in the returned summary.
"""

from __future__ import annotations

from typing import Any

from kafka_ferry.operators.base import MigrationOperator
from kafka_ferry.promotion.guard import promotion_status
from kafka_ferry.translation.translate import (
    checkpoint_translations,
    commit_translated_offsets,
    export_offset_map,
    translate_migration,
)


def _truthy(value: Any) -> bool:
    return value in (True, "True", "true", "1")


class TranslateOffsetsOperator(MigrationOperator):
    """Translates every migrated group's source offsets; writes MM2 checkpoints and the offset map."""

    template_fields = (*MigrationOperator.template_fields, "commit_offsets", "allow_rewind")

    def __init__(self, *, commit_offsets: bool | str = False, allow_rewind: bool | str = False, **kwargs) -> None:
        # after the copy report, also when the copy skipped for lack of work; not when the branch skipped it all
        kwargs.setdefault("trigger_rule", "none_failed_min_one_success")
        super().__init__(**kwargs)
        self.commit_offsets = commit_offsets
        self.allow_rewind = allow_rewind

    def execute(self, context: Any) -> dict:
        status = promotion_status(self.state_store)
        if status and status.get("status") == "promoted":
            self.log.info("migration %s is promoted: catch-up translation skipped", self.spec.name)
            return {"skipped": "promoted"}
        result = translate_migration(self.spec, self.source_hook, self.destination_hook, self.state_store)
        summary = result.summary()
        summary["checkpoints"] = checkpoint_translations(self.spec, self.destination_hook, result.decisions)
        json_path, csv_path = export_offset_map(self.spec, result.copies.values())
        summary["offset_map"] = {"json": str(json_path), "csv": str(csv_path)}
        if _truthy(self.commit_offsets):
            outcomes = commit_translated_offsets(self.destination_hook, result.decisions,
                                                 allow_rewind=_truthy(self.allow_rewind))
            summary["commits"] = [o.as_dict() for o in outcomes]
        self.log.info("translation of %s: %s", self.spec.name, {k: v for k, v in summary.items() if k != "commits"})
        return summary
