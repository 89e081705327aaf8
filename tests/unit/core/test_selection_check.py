"""Empty selections: refused with the closest names, unless the spec says an empty selection is intended."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.specs.selection_check import EmptySelection, check_selections, closest, empty_selection_problem
from kafka_ferry.core.specs.spec import SpecError, parse_spec

BASE = {
    "name": "nu", "tenant": "nu",
    "source": {"connection_id": "nu_old_kafka", "alias": "old"},
    "destination": {"connection_id": "nu_new_kafka", "alias": "new"},
    "topics": {"include": ["nu.event"]},
}
TOPICS = ["nu.events", "nu.users", "__consumer_offsets"] + [f"other.t{i}" for i in range(35)]


def spec(**sections):
    return parse_spec({**BASE, **sections}, "nu.yaml")


def test_a_topic_include_that_matches_nothing_names_the_count_and_the_closest_topic():
    with pytest.raises(EmptySelection) as raised:
        check_selections(spec(), TOPICS, [])
    assert str(raised.value) == (
        "migration 'nu': nothing selected, nothing was changed: topics.include ['nu.event'] matched 0 of 37 source "
        "topics; closest: nu.events; set topics.allow_empty: true if an empty selection is intended")


def test_groups_the_spec_selects_are_checked_too_and_both_problems_are_named_at_once():
    with pytest.raises(EmptySelection) as raised:
        check_selections(spec(groups={"include": ["nu-consumer"]}), TOPICS, ["nu-consumers", "billing"])
    message = str(raised.value)
    assert "topics.include ['nu.event'] matched 0 of 37 source topics; closest: nu.events" in message
    assert ("; groups.include ['nu-consumer'] matched 0 of 2 source groups; closest: nu-consumers; set "
            "groups.allow_empty: true if an empty selection is intended") in message


def test_an_exclude_that_removes_every_included_topic_says_so():
    problem = empty_selection_problem("topics", spec(topics={"include": ["nu\\..*"], "exclude": ["nu\\..*"]}).topics,
                                      ["nu.events", "nu.users"], "source topics")
    assert problem == ("topics.include ['nu\\\\..*'] matched 2 of 2 source topics, and topics.exclude ['nu\\\\..*'] "
                       "excluded all of them; set topics.allow_empty: true if an empty selection is intended")


def test_allow_empty_and_default_groups_pass_and_a_match_passes():
    check_selections(spec(topics={"include": ["nu.event"], "allow_empty": True}), TOPICS, [])
    check_selections(spec(topics={"include": ["nu\\.events"]}), TOPICS, [])  # default groups: may be none
    check_selections(spec(topics={"include": ["nu\\.events"]}, groups={"include": ["x"], "allow_empty": True}),
                     TOPICS, ["y"])


def test_no_name_alike_says_so():
    problem = empty_selection_problem("groups", spec(groups={"include": ["zzz"]}).groups, ["billing"], "source groups")
    assert problem is not None
    assert "matched 0 of 1 source groups; closest: (none alike);" in problem


def test_allow_empty_is_validated_in_the_spec():
    with pytest.raises(SpecError) as raised:
        spec(topics={"include": ["nu.event"], "allow_empty": "sometimes"})
    assert "topics.allow_empty" in str(raised.value) and "sometimes" in str(raised.value)


@given(st.lists(st.text(alphabet="abc.-", min_size=1, max_size=8), max_size=30), st.text(alphabet="abc.", max_size=8))
def test_closest_names_only_existing_names_best_first_at_most_three(names, pattern):
    found = closest([pattern], names)
    assert len(found) <= 3 and set(found) <= set(names) and len(set(found)) == len(found)
