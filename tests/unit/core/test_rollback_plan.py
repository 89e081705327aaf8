"""Rollback planning: every resume decision checked against a model of both logs (forward copies, records produced on
the destination after a cutover, copy-backs, holes on either side, several promote/rollback rounds)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_ferry.core.cutover.rollback_plan import (
    AFTER_EVERYTHING,
    COPIED_BACK_RECORD,
    FORWARD_RECORD,
    RollbackPlanError,
    across_rollback,
    copy_back_range,
    resume_on_destination,
    resume_on_source,
)

OPS = st.lists(st.sampled_from(["fwd", "fwd", "fwd", "post", "post", "back", "src_hole", "dst_hole"]), max_size=40)


class Model:
    """Both partitions as append-only logs: ``source``/``dest`` hold a record id per offset or None (a hole:
    aborted record, marker, compacted away). ``fwd`` copies a new source record forward at once; ``post`` is a record
    produced on the destination; ``back`` copies the pending ones back to the source's end (also done before a
    forward copy, as a rollback comes before the next catch-up)."""

    def __init__(self, ops):
        self.source: list[int | None] = []  # a record's number, None for a hole (a marker, an aborted record)
        self.dest: list[int | None] = []
        self.pending, self.forward, self.reverse = [], [], []
        n = 0
        for op in ops:
            if op == "fwd":
                self.back()
                n += 1
                self.forward.append((len(self.source), len(self.dest)))
                self.source.append(n)
                self.dest.append(n)
            elif op == "post":
                n += 1
                self.pending.append(len(self.dest))
                self.dest.append(n)
            elif op == "back":
                self.back()
            elif op == "src_hole":
                self.back()
                self.source.append(None)
            else:
                self.dest.append(None)
        self.back()

    def back(self):
        for d in self.pending:
            self.reverse.append((d, len(self.source)))
            self.source.append(self.dest[d])
        self.pending = []


def sparse(pairs, keep):
    """The syncs a tracker keeps: every run boundary, plus some inside runs."""
    out = []
    for i, (a, b) in enumerate(pairs):
        starts = i == 0 or (a - pairs[i - 1][0], b - pairs[i - 1][1]) != (1, 1)
        ends = i == len(pairs) - 1 or (pairs[i + 1][0] - a, pairs[i + 1][1] - b) != (1, 1)
        if starts or ends or keep(i):
            out.append((a, b))
    return out


def records_from(log, offset):
    return [r for r in log[offset:] if r is not None]


@settings(max_examples=400, deadline=None)
@given(OPS, st.sets(st.integers(0, 40)))
def test_a_group_resumes_on_the_source_at_exactly_the_records_it_had_not_read(ops, extra):
    m = Model(ops)
    forward, reverse = sparse(m.forward, extra.__contains__), sparse(m.reverse, extra.__contains__)
    for g in range(len(m.dest) + 2):
        r = resume_on_source(forward, reverse, g, len(m.source))
        assert records_from(m.source, r.to_offset) == records_from(m.dest, g), (g, r)
        assert r.reason


@settings(max_examples=400, deadline=None)
@given(OPS, st.sets(st.integers(0, 40)))
def test_after_a_rollback_a_group_on_the_source_resumes_exactly_on_the_destination(ops, extra):
    m = Model(ops)
    forward, reverse = sparse(m.forward, extra.__contains__), sparse(m.reverse, extra.__contains__)
    for u in range(len(m.source) + 2):
        r = resume_on_destination(forward, reverse, u, len(m.dest))
        assert records_from(m.dest, r.to_offset) == records_from(m.source, u), (u, r)


def test_methods_and_reasons_name_the_record():
    forward = [(0, 0), (9, 9)]  # source 0..9 copied to destination 0..9
    reverse = [(10, 10), (12, 12)]  # destination 10..12 produced after the cutover, copied back to 10..12
    on_forward = resume_on_source(forward, reverse, 4, 13)
    assert (on_forward.to_offset, on_forward.method) == (4, FORWARD_RECORD)
    on_back = resume_on_source(forward, reverse, 11, 13)
    assert (on_back.to_offset, on_back.method) == (11, COPIED_BACK_RECORD)
    past = resume_on_source(forward, reverse, 13, 13)
    assert (past.to_offset, past.method) == (13, AFTER_EVERYTHING)
    assert "13" in past.reason


def test_contradicting_logs_are_refused():
    with pytest.raises(RollbackPlanError, match="claimed by both"):
        resume_on_source([(0, 5)], [(5, 7)], 5, 9)
    with pytest.raises(RollbackPlanError, match="not after"):
        resume_on_source([(0, 0)], [(1, 7)], 0, 7)


def test_copy_back_range_starts_after_the_forward_copy_then_at_its_own_progress():
    first = copy_back_range("d", 0, "s", forward_last_downstream=41, reverse_next=None, log_start=0, stable_end=60)
    assert (first.start, first.end, first.offsets) == (42, 60, 18) and "41" in first.reason
    again = copy_back_range("d", 0, "s", forward_last_downstream=41, reverse_next=60, log_start=0, stable_end=60)
    assert again.offsets == 0
    fresh = copy_back_range("d", 0, "s", forward_last_downstream=None, reverse_next=None, log_start=3, stable_end=5)
    assert (fresh.start, fresh.end) == (3, 5)
    trimmed = copy_back_range("d", 0, "s", forward_last_downstream=1, reverse_next=None, log_start=7, stable_end=9)
    assert trimmed.start == 7 and "log start" in trimmed.reason


def test_a_forward_decision_is_corrected_only_among_copied_back_records():
    from kafka_ferry.core.offsets.offset_decisions import OffsetDecision, PartitionCopy
    from kafka_ferry.core.offsets.offset_sync_policy import SyncPoint as P

    # source: 0..9 own records, 10..12 copied back (destination 10, 12, 14: markers between), 13..15 new ones
    # forward-copied to destination 15..17
    forward = PartitionCopy("s", 0, "d", 16, (P(0, 0), P(9, 9), P(13, 15), P(15, 17)))
    back = PartitionCopy("d", 0, "s", 15, (P(10, 10), P(12, 11), P(14, 12)))

    def decision(upstream, downstream):
        return OffsetDecision("g", "s", 0, "d", upstream, downstream, "hole-next-record", "forward")

    below = decision(5, 5)
    assert across_rollback(below, forward, back) is below
    assert across_rollback(decision(11, 15), forward, None).downstream_offset == 15  # never rolled back: unchanged
    among = across_rollback(decision(11, 15), forward, back)
    assert (among.downstream_offset, among.method) == (12, COPIED_BACK_RECORD) and "forward alone: 15" in among.reason
    after = across_rollback(decision(14, 16), forward, back)
    assert (after.downstream_offset, after.method) == (16, FORWARD_RECORD)
