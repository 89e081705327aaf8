"""Kafka Streams applications as one unit (core.units.streams_apps) and their spec section (`applications`)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.specs.spec import SpecError, parse_spec
from kafka_ferry.core.units import streams_apps
from kafka_ferry.core.units.coupling import UnitSplitRefused, check_unit_splits

SPEC = {
    "name": "wc",
    "tenant": "acme",
    "source": {"connection_id": "kafka_src", "alias": "src"},
    "destination": {"connection_id": "kafka_dst", "alias": "dst"},
    "topics": {"include": ["text\\..*"]},
    "groups": {"include": ["billing-.*"]},
}
SOURCE_TOPICS = ["text.in", "wc-counts-changelog", "wc-words-repartition", "words.out", "wc-eu-counts-changelog",
                 "other", "__consumer_offsets"]


def spec_with(applications) -> dict:
    data = copy.deepcopy(SPEC)
    data["applications"] = applications
    return data


def test_internal_topics_are_named_by_the_application_and_the_longest_id_owns_a_topic():
    assert streams_apps.owner("wc-counts-changelog", ["wc"]) == "wc"
    assert streams_apps.owner("wc-eu-counts-changelog", ["wc", "wc-eu"]) == "wc-eu"
    assert streams_apps.owner("wc-changelog", ["wc"]) is None  # no store name between id and suffix
    assert streams_apps.owner("wcx-counts-changelog", ["wc"]) is None
    assert streams_apps.owner("wc-counts-changelog.bak", ["wc"]) is None
    assert streams_apps.internal_topics("wc", SOURCE_TOPICS, ["wc-eu"]) == (
        ("wc-counts-changelog",), ("wc-words-repartition",))


def test_detection_finds_groups_with_internal_topics_only():
    groups = ["wc", "billing-1", "wc-eu", "text.in"]
    assert streams_apps.detect(groups, SOURCE_TOPICS) == ["wc", "wc-eu"]
    assert streams_apps.detect(["billing-1"], SOURCE_TOPICS) == []


def test_an_application_holds_its_inputs_internal_and_output_topics_and_its_group():
    apps = streams_apps.applications({"wc": ("words.out",)}, ["wc", "wc-eu", "billing-1"], SOURCE_TOPICS,
                                     {"wc": {"text.in", "wc-words-repartition"}, "billing-1": {"other"}})
    app, eu = apps
    assert eu == streams_apps.StreamsApplication("wc-eu", (), ("wc-eu-counts-changelog",))  # detected
    assert app == streams_apps.StreamsApplication("wc", ("text.in",), ("wc-counts-changelog",),
                                                  ("wc-words-repartition",), ("words.out",), declared=True)
    assert app.topics == ("text.in", "wc-counts-changelog", "wc-words-repartition", "words.out")
    assert app.reason == "Kafka Streams application wc"
    assert app.describe() == ("Kafka Streams application wc (named in the spec): group wc; input text.in; "
                              "changelog wc-counts-changelog; repartition wc-words-repartition; output words.out")


def test_a_selection_taking_part_of_an_application_is_named_with_what_it_leaves_out():
    app = streams_apps.StreamsApplication("wc", ("text.in",), ("wc-counts-changelog",), ("wc-words-repartition",))
    whole = ["text.in", "wc-counts-changelog", "wc-words-repartition"]
    assert streams_apps.selection_problems([app], whole, ["wc"], whole) == []
    assert streams_apps.selection_problems([app], [], ["wc"], whole) == []  # not this migration's application
    (problem,) = streams_apps.selection_problems([app], ["text.in"], [], whole)
    assert problem.startswith("Kafka Streams application wc would be split: the selection leaves out topic "
                              "wc-counts-changelog, topic wc-words-repartition, group wc;")


def test_a_named_application_whose_output_topic_is_missing_on_the_source_is_named():
    app = streams_apps.StreamsApplication("wc", (), (), (), ("words.out",), declared=True)
    (problem,) = streams_apps.selection_problems([app], ["words.out"], ["wc"], ["text.in"])
    assert "output topic(s) words.out named in the spec (applications.output_topics) are not on the source" in problem


def test_a_named_application_selects_its_internal_and_output_topics_and_its_group():
    spec = parse_spec(spec_with([{"application_id": "wc", "output_topics": ["words.out"]}]))
    # By names alone wc-eu-counts-changelog is also wc's (store "eu-counts"): where wc-eu is an application of its
    # own, the pre-flight's selection_problems then names wc-eu as split (a refusal, never a silent half move).
    assert select_topics(spec, SOURCE_TOPICS) == ["text.in", "wc-counts-changelog", "wc-eu-counts-changelog",
                                                  "wc-words-repartition", "words.out"]
    without_eu = [t for t in SOURCE_TOPICS if "-eu-" not in t]
    assert select_topics(spec, without_eu) == ["text.in", "wc-counts-changelog", "wc-words-repartition", "words.out"]
    assert spec.selects_group("wc") and spec.selects_group("billing-7") and not spec.selects_group("wc-eu")
    plain = parse_spec(SPEC)
    assert select_topics(plain, SOURCE_TOPICS) == ["text.in"] and not plain.selects_group("wc")


@pytest.mark.parametrize(("applications", "message"), [
    ([{"application_id": "word count"}], "field 'applications[0].application_id' = 'word count': not a legal Kafka "
     "Streams application.id"),
    ([{"application_id": "wc", "output_topics": ["out", "out"]}],
     "field 'applications[0].output_topics' = ['out', 'out']: 'out' is listed twice"),
    ([{"application_id": "wc"}, {"application_id": "wc"}], "application_id 'wc' is listed twice"),
    ([{"application_id": "wc", "outputs": ["x"]}], "field 'applications[0].outputs' = ['x']: unknown key"),
])
def test_bad_applications_name_file_field_and_value(applications, message):
    with pytest.raises(SpecError) as raised:
        parse_spec(spec_with(applications), "migrations/wc.yaml")
    assert message in str(raised.value) and str(raised.value).startswith("migrations/wc.yaml")


def test_applications_keep_topic_names():
    data = spec_with([{"application_id": "wc"}])
    data["topics"]["rename"] = {"policy": "prefix", "prefix": "old."}
    with pytest.raises(SpecError) as raised:
        parse_spec(data, "migrations/wc.yaml")
    assert str(raised.value).startswith("migrations/wc.yaml: field 'topics.rename.policy' = 'prefix': a spec with "
                                        "applications (Kafka Streams) keeps topic names")


ids = st.from_regex(r"[a-z]{1,3}(-[a-z]{1,3}){0,2}", fullmatch=True)


@given(st.lists(ids, min_size=1, max_size=5, unique=True), st.lists(st.tuples(ids, st.sampled_from(
    ["changelog", "repartition", "out"])), max_size=8))
def test_every_internal_topic_has_one_owner_and_it_is_the_longest_fitting_id(apps, suffixed):
    topics = [f"{a}-{b}" for a, b in suffixed] + [f"{a}-store-changelog" for a in apps]
    owners: dict[str, list[str]] = {}
    for app in apps:
        changelogs, repartitions = streams_apps.internal_topics(app, topics, apps)
        assert f"{app}-store-changelog" in changelogs or any(  # a longer id may own it: wc-eu vs wc + eu-store
            o != app and f"{app}-store-changelog".startswith(f"{o}-") for o in apps)
        for t in changelogs + repartitions:
            owners.setdefault(t, []).append(app)
    for topic, who in owners.items():
        assert len(who) == 1
        assert who[0] == max((a for a in apps if topic.startswith(f"{a}-")), key=len)


def test_promoting_the_applications_group_alone_or_its_input_topic_alone_is_refused_naming_the_unit():
    app = streams_apps.StreamsApplication("wc", ("text.in",), ("wc-counts-changelog",), ("wc-words-repartition",),
                                          ("words.out",), declared=True)
    unit = app.unit()
    assert (unit.name, unit.groups, unit.reason) == ("wc", frozenset({"wc"}), "Kafka Streams application wc")
    assert unit.topics == frozenset(app.topics)
    with pytest.raises(UnitSplitRefused, match=r"unit 'wc' \(Kafka Streams application wc\): this step moves group "
                                               r"wc and would leave topics text.in, wc-counts-changelog"):
        check_unit_splits([unit], groups=["wc"], step="promote-groups")
    with pytest.raises(UnitSplitRefused, match=r"moves topic text.in and would leave topics wc-counts-changelog, "
                                               r"wc-words-repartition, words.out and group wc behind"):
        check_unit_splits([unit], topics=["text.in"], step="promote-topics")
    assert check_unit_splits([unit], topics=app.topics, groups=["wc"]) == []  # the whole unit moves
    assert len(check_unit_splits([unit], groups=["wc"], accepted=["wc"])) == 1  # coupling.accept_split: [wc]
