"""Staged cutover tasks: promote the groups, or the topics, chosen in the trigger form (never scheduled).

Thin over ``stages.group_promotion`` / ``stages.topic_promotion``: the names come from the run's params (checked by
the pre-flight), the work resumes from the state topic, and the final copies run in this task on threads (no JVM start
inside the window, as the whole-migration promotion's in-process final copy).
"""

from __future__ import annotations

from typing import Any

from kafka_ferry.copy.catch_up import threads_engine
from kafka_ferry.core.flags import parse_bool
from kafka_ferry.core.staged_cutover import validate_selection
from kafka_ferry.core.trigger_form import GROUPS_FIELD, TOPICS_FIELD, WAIVE_FIELD, names
from kafka_ferry.operators.base import MigrationOperator
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.stages.group_promotion import promote_group
from kafka_ferry.stages.group_readiness import ready_groups
from kafka_ferry.stages.topic_promotion import promote_topics
from kafka_ferry.translation.translate import migrated_groups


class PromoteGroupsOperator(MigrationOperator):
    """Promotes each group named in the form's ``groups`` field, in order; returns each group's record."""

    ui_color = "#f8e0c8"

    @fail_fast
    def execute(self, context: Any) -> dict:
        params = context["params"]
        groups = validate_selection("groups", names(params.get(GROUPS_FIELD)), migrated_groups(self.state_store))
        for line in ready_groups(self.source_cluster, self.state_store, quiet_ms=0):
            self.log.info("group %s: %s (%s)", line.group, "ready" if line.ready else "not ready", line.reason)
        run_id = context.get("run_id") or "promote-groups"
        out = {}
        for group in groups:
            record = promote_group(self.spec, self.source_cluster, self.destination_cluster, self.state_store, group,
                                   run_id, threads_engine(), allow_rewind=parse_bool(params.get("allow_rewind")))
            self.log.info("group %s promoted by run %s at %s ms", group, record.run_id, record.promoted_at_ms)
            out[group] = {"run_id": record.run_id, "promoted_at_ms": record.promoted_at_ms}
        return out


class PromoteTopicsOperator(MigrationOperator):
    """Promotes the topics named in the form's ``topics`` field, with the groups waived in ``waive_groups``."""

    ui_color = "#f8e0c8"

    def __init__(self, *, quiet_window_s: float = 10.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.quiet_window_s = quiet_window_s

    @fail_fast
    def execute(self, context: Any) -> dict:
        params = context["params"]
        done = promote_topics(self.spec, self.source_cluster, self.destination_cluster, self.state_store,
                              names(params.get(TOPICS_FIELD)), context.get("run_id") or "promote-topics",
                              threads_engine(), waived_groups=names(params.get(WAIVE_FIELD)),
                              quiet_window_s=self.quiet_window_s)
        return {t: {"run_id": r.run_id, "promoted_at_ms": r.promoted_at_ms} for t, r in done.items()}
