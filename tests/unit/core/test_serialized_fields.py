"""Per topic and field: which payloads carry the registry wire format, and a rewrite that touches only those."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.schemas.schema_wire import SchemaIdRewriter, UnknownSchemaId, schema_id_of, with_schema_id
from kafka_ferry.core.schemas.serialized_fields import (
    FieldDecision,
    FieldsUndecided,
    RecordRewriter,
    choice_of,
    decide_fields,
)
from kafka_ferry.core.specs.spec import SpecError, parse_spec


def long_key(n: int) -> bytes:
    return struct.pack(">q", n)  # what Java's LongSerializer writes


AVRO_VALUE = bytes.fromhex("00 00000001 02 61")  # source id 1


def test_topic_name_strategy_subjects_decide_each_field():
    subjects = ["orders-value", "users-key", "users-value", "clicks-key", "other-value"]
    decided = decide_fields(["orders", "users", "clicks", "raw"], subjects)
    assert {t: d.fields for t, d in decided.items()} == {
        "orders": "value", "users": "both", "clicks": "key", "raw": "none"}
    assert "orders-value" in decided["orders"].reason
    assert "copied byte for byte" in decided["raw"].reason


def test_the_first_matching_override_wins_over_the_registry():
    overrides = (("orders", "none"), ("ord.*", "both"), (".*", "value"))
    decided = decide_fields(["orders", "ord-eu", "users"], ["orders-value", "users-key"], overrides)
    assert {t: d.fields for t, d in decided.items()} == {"orders": "none", "ord-eu": "both", "users": "value"}
    assert decided["orders"].reason == "spec: serialized_fields[0] (topics 'orders', fields none)"
    assert "serialized_fields[1]" in decided["ord-eu"].reason


def test_topic_record_name_subjects_make_the_value_serialized_not_the_key():
    include = (r"orders-acme\..*", r"orders-eu-acme\..*")
    subjects = ["orders-acme.Created", "orders-acme.Paid", "orders-eu-acme.Created", "orders-eu-value"]
    decided = decide_fields(["orders", "orders-eu"], subjects, include=include)
    assert (decided["orders"].key, decided["orders"].value) == (False, True)
    assert "orders-acme.Created" in decided["orders"].reason and "keys" in decided["orders"].reason
    # the longest topic prefix owns a subject: orders-eu-acme.Created belongs to orders-eu, not orders
    assert "orders-eu-acme.Created" in decided["orders-eu"].reason
    assert "orders-eu-acme" not in decided["orders"].reason


def test_record_name_subjects_that_name_no_topic_make_values_serialized_where_nothing_else_says():
    decided = decide_fields(["orders", "users"], ["acme.Order", "users-key", "unlisted.Thing"],
                            include=(r"acme\..*", r"unlisted\..*"), exclude=(r"unlisted\..*",))
    assert decided["orders"].fields == "value" and "acme.Order" in decided["orders"].reason
    assert "unlisted.Thing" not in decided["orders"].reason  # excluded subjects are not evidence
    assert decided["users"].fields == "key"  # its own subjects say what it is
    assert decide_fields(["orders"], ["acme.Order"])["orders"].fields == "none"  # not listed: no evidence


def test_a_subject_only_included_by_regex_is_still_a_topic_name_subject():
    decided = decide_fields(["orders"], ["orders-key"], include=(".*",))
    assert decided["orders"].fields == "key"


NAMES = st.sampled_from(["a", "a-b", "b", "orders", "orders-eu"])
SUBJECTS = st.sets(st.one_of(st.builds(lambda t, f: f"{t}-{f}", NAMES, st.sampled_from(["key", "value", "acme.R"])),
                             st.sampled_from(["acme.R", "other.S"])), max_size=8)
RULES = st.lists(st.tuples(st.sampled_from(["a", "a.*", "orders.*", "x"]), st.sampled_from(
    ["key", "value", "both", "none"])), max_size=3)


@given(st.sets(NAMES, min_size=1), SUBJECTS, RULES, st.sampled_from([(), (r"acme\..*",), (r".*acme.*",)]))
def test_every_decision_follows_the_first_applicable_rule(topics, subjects, rules, include):
    decided = decide_fields(topics, subjects, rules, include)
    assert set(decided) == topics
    for topic, d in decided.items():
        rule = next(((p, f) for p, f in rules if re.fullmatch(p, topic)), None)
        if rule is not None:  # the spec wins, whatever the registry holds
            assert d.fields == rule[1] and d.reason.startswith("spec: serialized_fields[")
            continue
        assert d.key == (f"{topic}-key" in subjects)  # only a <topic>-key subject makes a key serialized
        if f"{topic}-value" in subjects:
            assert d.value
        if not include:  # without record-name subjects listed, the value needs its own subject
            assert d.value == (f"{topic}-value" in subjects)
        assert d.reason


@given(st.booleans(), st.booleans())
def test_decisions_round_trip_through_their_state_record(key, value):
    decision = FieldDecision("t", key, value, "why")
    assert FieldDecision.from_record("t", decision.as_record()) == decision
    assert FieldDecision.of_choice("t", choice_of(key, value), "why") == decision


# The rewrite: a long key whose bytes 1-4 equal a mapped id is a key, not a schema id.
LONGS = st.integers(min_value=0, max_value=2**56 - 1)  # < 2^56: the first byte is 0x00, the wire format's magic


@given(LONGS, st.sampled_from(["fail", "pass-through"]))
def test_a_value_only_topic_never_touches_or_fails_on_its_long_keys(n, policy):
    key = long_key(n)
    mapped_id = schema_id_of(key)  # the map holds exactly the id the key's bytes 1-4 look like
    assert mapped_id is not None
    rewriter = RecordRewriter(SchemaIdRewriter({1: 42, mapped_id: mapped_id + 7}, policy),
                              {"orders": FieldDecision("orders", False, True, "orders-value")})
    out_key, out_value = rewriter.rewrite("orders", key, AVRO_VALUE)
    assert out_key is key
    assert schema_id_of(out_value) == (mapped_id + 7 if mapped_id == 1 else 42)
    assert out_value is not None and out_value[5:] == AVRO_VALUE[5:]
    unknown = RecordRewriter(SchemaIdRewriter({}, "fail"), {"orders": FieldDecision("orders", False, False, "-")})
    assert unknown.rewrite("orders", key, AVRO_VALUE) == (key, AVRO_VALUE)  # no id looked at, none fails


@given(st.integers(min_value=1, max_value=2**31 - 1), st.integers(min_value=1, max_value=2**31 - 1))
def test_a_serialized_key_is_rewritten_like_before(source_id, destination_id):
    key = with_schema_id(b"\x00" * 5 + b"\x02k", source_id)
    rewriter = RecordRewriter(SchemaIdRewriter({source_id: destination_id}),
                              {"t": FieldDecision("t", True, False, "t-key")})
    out_key, out_value = rewriter.rewrite("t", key, long_key(source_id))
    assert schema_id_of(out_key) == destination_id and out_key is not None and out_key[5:] == key[5:]
    assert out_value == long_key(source_id)  # the value is not serialized: untouched


def test_unknown_ids_fail_only_in_serialized_fields_and_digests_pass_them_through():
    rewriter = RecordRewriter(SchemaIdRewriter({}, "fail"), {"t": FieldDecision("t", True, True, "-")})
    with pytest.raises(UnknownSchemaId):
        rewriter.rewrite("t", None, AVRO_VALUE)
    assert rewriter.passing_through().rewrite("t", None, AVRO_VALUE) == (None, AVRO_VALUE)


def test_a_topic_without_a_decision_is_refused_never_guessed():
    rewriter = RecordRewriter(SchemaIdRewriter({1: 2}), {"t": FieldDecision("t", False, True, "-")})
    with pytest.raises(FieldsUndecided, match="'new-topic'.*migrate_schemas"):
        rewriter.fields_by_topic(["t", "new-topic"])
    assert rewriter.fields_by_topic(["t"]) == {"t": "value"}


# The spec's override.
def spec_doc(rules):
    return {"name": "m1", "tenant": "t", "source": {"connection_id": "src", "alias": "a"},
            "destination": {"connection_id": "dst", "alias": "b"}, "topics": {"include": ["orders.*"]},
            "schema_registry": {"source_connection_id": "sr_src", "destination_connection_id": "sr_dst",
                                "serialized_fields": rules}}


def test_the_override_is_parsed_in_order():
    spec = parse_spec(spec_doc([{"topics": "orders\\..*", "fields": "value"}, {"topics": ".*", "fields": "both"}]))
    registry = spec.schema_registry
    assert registry is not None
    assert registry.field_overrides() == (("orders\\..*", "value"), (".*", "both"))
    none_given = parse_spec(spec_doc([])).schema_registry
    assert none_given is not None and none_given.field_overrides() == ()


@pytest.mark.parametrize(("rule", "complaint"), [
    ({"topics": "orders(", "fields": "value"}, "not a valid regex"),
    ({"topics": "orders", "fields": "keys"}, "fields"),
    ({"topics": "orders"}, "fields"),
    ({"topics": "orders", "fields": "value", "extra": 1}, "extra"),
])
def test_a_bad_override_is_refused_naming_the_field(rule, complaint):
    with pytest.raises(SpecError, match=complaint) as refused:
        parse_spec(spec_doc([rule]))
    assert "serialized_fields" in str(refused.value)
