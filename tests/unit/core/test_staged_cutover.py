"""Staged cutover rules: invariants A-D of kafka_ferry.core.cutover.staged_cutover."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND, TOPIC_PROMOTION_KIND
from kafka_ferry.core.cutover.staged_cutover import (
    GROUP_STEPS,
    TOPIC_STEPS,
    StagedCutoverError,
    UnitPromotion,
    blocking_groups,
    check_topic_promotion,
    fences_overtaken,
    group_readiness,
    groups_to_commit,
    next_step,
    promoted_names,
    start_or_resume,
    topics_to_copy,
    validate_selection,
)

names = st.sampled_from([f"n{i}" for i in range(8)])
name_sets = st.frozensets(names)


@given(name_sets, name_sets)
def test_a_promoted_group_is_never_committed(groups, promoted):
    out = groups_to_commit(groups, promoted)
    assert not set(out) & promoted
    assert set(out) == groups - promoted


@given(name_sets, name_sets)
def test_a_promoted_topic_is_not_copied(topics, promoted):
    assert set(topics_to_copy(topics, promoted)) == topics - promoted


@given(name_sets, st.dictionaries(names, name_sets), name_sets, name_sets)
def test_topic_promotion_allowed_iff_every_reader_promoted_or_waived(topics, readers, promoted, waived):
    readers_of = {g for g, read in readers.items() if read & topics}
    allowed = readers_of <= (promoted | waived)
    if allowed:
        check_topic_promotion(topics, readers, promoted, waived)
    else:
        with pytest.raises(StagedCutoverError) as err:
            check_topic_promotion(topics, readers, promoted, waived)
        for g in readers_of - promoted - waived:
            assert f"{g}" in str(err.value)
    blocked = blocking_groups(topics, readers, promoted, waived)
    assert {g for gs in blocked.values() for g in gs} == readers_of - promoted - waived


def test_refusal_names_topic_and_group():
    with pytest.raises(StagedCutoverError, match="topic orders is read by unpromoted group\\(s\\) billing"):
        check_topic_promotion(["orders"], {"billing": ["orders"], "audit": ["orders"]}, ["audit"], [])


@given(st.lists(st.sampled_from(GROUP_STEPS)), st.integers(0, 10**13))
def test_resume_runs_the_first_missing_step_and_promoting_twice_changes_nothing(done, now):
    record = UnitPromotion("g", "run-1", started_at_ms=5)
    for step in done:
        record = record.with_step(GROUP_PROMOTION_KIND, step, now)
    step = next_step(GROUP_PROMOTION_KIND, record)
    if "promoted" in done:
        assert step is None
        again = record.with_step(GROUP_PROMOTION_KIND, "promoted", now + 1000)
        assert again == record  # promoting twice changes nothing, the first timestamp stays
    else:
        assert step not in record.steps_done
        assert all(s in record.steps_done for s in GROUP_STEPS[: GROUP_STEPS.index(step)] if s in done)
    assert list(record.steps_done) == [s for s in GROUP_STEPS if s in done]


def test_steps_run_in_order_from_nothing():
    record, seen = None, []
    while (step := next_step(TOPIC_PROMOTION_KIND, record)) is not None:
        seen.append(step)
        record = start_or_resume(TOPIC_PROMOTION_KIND, "t", record, "run-2", 7).with_step(
            TOPIC_PROMOTION_KIND, step, 9)
    assert tuple(seen) == TOPIC_STEPS
    assert record is not None
    assert record.promoted_at_ms == 9 and record.started_at_ms == 7 and record.run_id == "run-2"


def test_resume_keeps_the_first_run():
    first = UnitPromotion("g", "run-1", ("source_quiet",), started_at_ms=3)
    assert start_or_resume(GROUP_PROMOTION_KIND, "g", first, "run-2", 99) is first


@given(st.lists(st.sampled_from(GROUP_STEPS), unique=True), st.text(min_size=1, max_size=8),
       st.dictionaries(st.text(max_size=5), st.integers()))
def test_record_round_trip(done, run_id, detail):
    record = UnitPromotion("g", run_id, tuple(s for s in GROUP_STEPS if s in done), 4,
                           10 if "promoted" in done else None, detail)
    assert UnitPromotion.from_record(GROUP_PROMOTION_KIND, "g", record.to_record()) == record


@pytest.mark.parametrize("record, field", [
    ({"run_id": "r", "steps_done": ["nope"]}, "steps_done=['nope']"),
    ({"run_id": "", "steps_done": []}, "run_id=''"),
    ({"steps_done": "promoted", "run_id": "r"}, "steps_done='promoted'"),
])
def test_malformed_record_names_key_field_and_value(record, field):
    with pytest.raises(StagedCutoverError, match=f"group_promotion/g1: field {field}".replace("[", "\\[")
                       .replace("]", "\\]")):
        UnitPromotion.from_record(GROUP_PROMOTION_KIND, "g1", record)


def test_promoted_names_reads_only_promoted():
    records = {"a": {"run_id": "r", "steps_done": list(GROUP_STEPS)},
               "b": {"run_id": "r", "steps_done": ["source_quiet"]}}
    assert promoted_names(records, GROUP_PROMOTION_KIND) == ["a"]


def test_selection_errors_name_the_unknown_and_empty():
    assert validate_selection("groups", [" b", "a", "b"], ["a", "b", "c"]) == ["a", "b"]
    with pytest.raises(StagedCutoverError, match=r"groups \['x'\] are not part of this migration"):
        validate_selection("groups", ["a", "x"], ["a"])
    with pytest.raises(StagedCutoverError, match="no topics chosen"):
        validate_selection("topics", ["", " "], ["t"])


@given(st.dictionaries(names, st.integers(0, 3)), st.dictionaries(names, st.none() | st.integers(0, 1000)),
       name_sets, st.integers(0, 500))
def test_ready_means_described_empty_quiet_and_not_promoted(members, commits, promoted, quiet):
    groups = set(members) | set(commits) | promoted
    for r in group_readiness(groups, members, commits, promoted, 1000, quiet):
        last = commits.get(r.group)
        expected = (r.group not in promoted and members.get(r.group) == 0
                    and (last is None or 1000 - last >= quiet))
        assert r.ready == expected, r


@given(name_sets, name_sets, name_sets)
def test_a_fence_put_is_kept_only_while_its_unit_is_unpromoted_and_its_record_stands(fenced, promoted, recorded):
    dropped = fences_overtaken(fenced, promoted, recorded)
    assert dropped == sorted(dropped) and set(dropped) <= fenced
    for key in fenced:
        # kept iff neither side of the race saw the other: not promoted yet and the record still there
        assert (key in dropped) == (key in promoted or key not in recorded), key


def test_fences_overtaken_by_a_promotion():
    assert fences_overtaken(["GROUP:a", "GROUP:b", "TOPIC:t"], promoted=["GROUP:a"],
                            still_recorded=["GROUP:a", "GROUP:b"]) == ["GROUP:a", "TOPIC:t"]
