"""The final translation as stored in the state round-trips into decisions and expected group offsets."""

from __future__ import annotations

import json

from kafka_ferry.core.offsets.offset_decisions import OffsetDecision
from kafka_ferry.promotion.steps import expected_group_offsets, stored_decisions


def test_stored_decisions_round_trip():
    decisions = [OffsetDecision("g", "t", 0, "d", 5, 3, "exact-run", "r", "meta", 9, 7),
                 OffsetDecision("g", "t", 1, "", 5, None, "not-copied", "r")]
    state = {"translation/g": json.loads(json.dumps({"decisions": [d.as_dict() for d in decisions]})),
             "step/final_translation": {"status": "done"}}
    assert stored_decisions(state) == decisions
    assert expected_group_offsets(decisions) == {"g": {("d", 0): 3}}
