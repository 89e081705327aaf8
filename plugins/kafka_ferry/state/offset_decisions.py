"""The final translation's decisions as stored in the state topic, and the group offsets they ask for.

Read by the promotion steps and the readiness checks; the decisions themselves are `core.offsets.offset_decisions`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka_ferry.core.common.state_records import TRANSLATION_PREFIX, under
from kafka_ferry.core.offsets.offset_decisions import OffsetDecision


def stored_decisions(state: dict[str, dict[str, Any]]) -> list[OffsetDecision]:
    """The final translation as ``final_translation`` recorded it."""
    fields = set(OffsetDecision.__dataclass_fields__)
    out = []
    for value in under(state, TRANSLATION_PREFIX).values():
        out += [OffsetDecision(**{k: v for k, v in row.items() if k in fields}) for row in value["decisions"]]
    return out


def expected_group_offsets(decisions: Iterable[OffsetDecision]) -> dict[str, dict[tuple[str, int], int]]:
    """Per destination group, the offsets the final translation wants committed."""
    out: dict[str, dict[tuple[str, int], int]] = {}
    for d in decisions:
        if d.downstream_offset is not None:
            out.setdefault(d.group, {})[(d.destination_topic, d.partition)] = d.downstream_offset
    return out
