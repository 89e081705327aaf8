"""Effective compatibility, read alike from registries that answer an unset subject differently."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.schemas.schema_compat import effective_level, global_line, mismatches, own_level

LEVELS = st.sampled_from(["NONE", "BACKWARD", "FORWARD", "FULL", "BACKWARD_TRANSITIVE"])


def test_not_configured_means_the_subject_follows_the_global_level():  # Confluent API, AxonOps
    assert own_level(None, "BACKWARD") is None
    assert own_level(None, None) is None


def test_apicurios_none_for_an_unset_subject_is_not_taken_as_its_level():
    assert own_level("NONE", "BACKWARD") is None  # asked with defaultToGlobal=true: the global BACKWARD


def test_a_set_level_is_the_same_both_ways():
    assert own_level("FULL", "FULL") == "FULL"
    assert own_level("NONE", "NONE") == "NONE"
    assert own_level("FULL", None) == "FULL"  # a server that does not know defaultToGlobal


@given(LEVELS, LEVELS, st.booleans())
def test_the_effective_level_is_the_subjects_own_else_the_global(subject, global_level, is_set):
    own = own_level(subject if is_set else "NONE", subject if is_set else global_level)
    assert effective_level(own, global_level) == (subject if is_set else global_level)


def test_mismatches_name_each_subject_whose_effective_levels_differ():
    found = mismatches({"a": None, "b": "FULL", "c": None}, "BACKWARD", {"x.a": "NONE", "x.b": None, "x.c": None},
                       "BACKWARD", {"a": "x.a", "b": "x.b", "c": "x.c"})
    assert [(m.destination_subject, m.source, m.destination) for m in found] == [
        ("x.a", "BACKWARD", "NONE"), ("x.b", "FULL", "BACKWARD")]
    assert "subject 'x.a': effective compatibility NONE on the destination, BACKWARD on the source" in str(found[0])


def test_the_global_line_says_both_levels_and_whether_it_moves():
    assert global_line("BACKWARD", "BACKWARD", False) == "global compatibility: BACKWARD on both registries"
    assert "source BACKWARD, destination NONE: left as it is" in global_line("BACKWARD", "NONE", False)
    assert "moved to the destination" in global_line("BACKWARD", "NONE", True)
