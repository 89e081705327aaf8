"""The step names of every runner, as enums: each runner's order is its enum's order.

Why enums: a step name is stored in the state topic, named in a DAG task, counted on the run pages and matched by
the runners; a bare string mistyped in any of those places was silently a different step (the staged runners'
if-chains lifted the fence for any name no branch matched). Members are ``str`` (``StrEnum``), so stored records,
JSON and the pages keep the plain names they always had.

The tables that run them (``core.cutover.step_table.StepTable``) are declared beside the step functions:
``promotion.steps`` (``PromotionStep``), ``promotion.group`` (``GroupStep``), ``promotion.topic`` (``TopicStep``),
``promotion.rollback`` (``RollbackStep``), ``promotion.topic_rollback`` (``TopicRollbackStep``).
"""

from __future__ import annotations

from enum import StrEnum


class PromotionStep(StrEnum):
    """The whole migration's promotion (``promotion.steps``)."""

    FINAL_COPY = "final_copy"
    FINAL_TRANSLATION = "final_translation"
    COMMIT_OFFSETS = "commit_offsets"
    RECONCILE = "reconcile"
    SWITCH_TIMESTAMPS = "switch_timestamps"
    MARK_PROMOTED = "mark_promoted"


class GroupStep(StrEnum):
    """One consumer group's staged promotion (``promotion.group``)."""

    SOURCE_QUIET = "source_quiet"
    FINAL_COPY = "final_copy"
    TRANSLATED = "translated"
    COMMITTED = "committed"
    RECONCILED = "reconciled"
    PROMOTED = "promoted"


class TopicStep(StrEnum):
    """One topic's staged promotion (``promotion.topic``)."""

    SOURCE_QUIET = "source_quiet"
    FINAL_COPY = "final_copy"
    RECONCILED = "reconciled"
    PROMOTED = "promoted"


class RollbackStep(StrEnum):
    """The whole migration's rollback (``promotion.rollback``)."""

    QUIESCE = "quiesce"
    COPY_BACK = "copy_back"
    COMMIT_OFFSETS = "commit_offsets"
    FENCES = "fences"
    RECONCILE = "reconcile"
    MARK_ROLLED_BACK = "mark_rolled_back"


class TopicRollbackStep(StrEnum):
    """Promoted topics' rollback (``promotion.topic_rollback``)."""

    QUIESCE = "quiesce"
    COPY_BACK = "copy_back"
    RECONCILE = "reconcile"
    GROUPS = "groups"
    MARK_ROLLED_BACK = "mark_rolled_back"
