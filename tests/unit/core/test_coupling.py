"""Coupled units: invariants E and F of kafka_ferry.core.units.coupling, transaction units, the spec's `coupling:`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.core.specs.spec_source import SpecError
from kafka_ferry.core.units.coupling import (
    TRANSACTIONS_PREFIX,
    CoupledUnit,
    UnitSplitRefused,
    check_unit_splits,
    transaction_units,
    unit_splits,
    writers_beyond,
)

topic_names = st.sampled_from([f"t{i}" for i in range(6)])
group_names = st.sampled_from([f"g{i}" for i in range(4)])
units_strategy = st.lists(
    st.builds(CoupledUnit, name=st.sampled_from(["u0", "u1", "u2", "u3"]), topics=st.frozensets(topic_names),
              groups=st.frozensets(group_names), reason=st.just("r")),
    max_size=4, unique_by=lambda u: u.name)

PAYMENTS = CoupledUnit("transactions:payments-tx", frozenset({"payments", "ledger"}),
                       reason="transactional.id payments-tx writes them in the same transactions")


@given(units_strategy, st.frozensets(topic_names), st.frozensets(group_names), st.frozensets(topic_names),
       st.frozensets(group_names))
def test_e_a_split_is_exactly_a_partly_moved_unit(units, topics, groups, done_t, done_g):
    splits = {s.unit.name: s for s in unit_splits(units, topics, groups, done_t, done_g)}
    for unit in units:
        todo_t, todo_g = unit.topics - done_t, unit.groups - done_g
        moves = bool(todo_t & topics or todo_g & groups)
        leaves = bool(todo_t - topics or todo_g - groups)
        assert (unit.name in splits) == (moves and leaves)
        if unit.name in splits:
            s = splits[unit.name]
            assert s.moving_topics | s.left_topics == todo_t and not s.moving_topics & s.left_topics
            assert s.moving_groups | s.left_groups == todo_g and not s.moving_groups & s.left_groups
            assert s.moving_topics <= topics and not s.left_topics & topics


@given(units_strategy, st.frozensets(topic_names), st.frozensets(group_names))
def test_f_moving_every_unit_whole_is_never_refused(units, topics, groups):
    whole_t = set(topics).union(*(u.topics for u in units if u.topics & topics or u.groups & groups))
    whole_g = set(groups).union(*(u.groups for u in units if u.topics & topics or u.groups & groups))
    # closing over units may touch new ones: repeat until nothing more joins
    while True:
        more_t = whole_t.union(*(u.topics for u in units if u.topics & whole_t or u.groups & whole_g))
        more_g = whole_g.union(*(u.groups for u in units if u.topics & whole_t or u.groups & whole_g))
        if (more_t, more_g) == (whole_t, whole_g):
            break
        whole_t, whole_g = more_t, more_g
    assert check_unit_splits(units, whole_t, whole_g) == []


@given(units_strategy, st.frozensets(topic_names), st.frozensets(group_names))
def test_f_refused_unless_every_split_unit_is_accepted(units, topics, groups):
    splits = unit_splits(units, topics, groups)
    names = [s.unit.name for s in splits]
    if splits:
        with pytest.raises(UnitSplitRefused) as refused:
            check_unit_splits(units, topics, groups, accepted=names[1:])
        assert repr(names[0]) in str(refused.value)
    assert [s.unit.name for s in check_unit_splits(units, topics, groups, accepted=names)] == names


def test_refusal_names_unit_reason_what_is_left_and_both_ways_out():
    with pytest.raises(UnitSplitRefused) as refused:
        check_unit_splits([PAYMENTS], topics=["payments"], step="promote-topics")
    msg = str(refused.value)
    assert "promote-topics refused before any change" in msg
    assert "'transactions:payments-tx'" in msg and "payments-tx writes them in the same transactions" in msg
    assert "moves topic payments and would leave topic ledger behind" in msg
    assert "include the rest of each unit" in msg
    assert "coupling.accept_split: ['transactions:payments-tx']" in msg
    assert isinstance(refused.value, Permanent)


def test_a_member_promoted_earlier_completes_the_unit():
    assert unit_splits([PAYMENTS], topics=["payments"], promoted_topics=["ledger"]) == []
    # the unit's last member moving alone is no split; a unit not touched is not split either
    assert unit_splits([PAYMENTS], topics=["other"]) == []


def test_groups_and_topics_of_one_unit():
    app = CoupledUnit("wordcount", frozenset({"words", "wordcount-store-changelog"}), frozenset({"wordcount"}),
                      "Kafka Streams application wordcount")
    (split,) = unit_splits([app], groups=["wordcount"])
    assert split.moving_groups == {"wordcount"} and split.left_topics == {"words", "wordcount-store-changelog"}
    assert split.as_dict()["left"] == {"topics": ["wordcount-store-changelog", "words"], "groups": []}
    assert unit_splits([app], topics=["words", "wordcount-store-changelog"], groups=["wordcount"]) == []


def test_long_lists_are_bounded():
    big = CoupledUnit("big", frozenset(f"t{i:03}" for i in range(400)), reason="declared in the spec")
    with pytest.raises(UnitSplitRefused) as refused:
        check_unit_splits([big], topics=["t000"])
    assert "and 394 more" in str(refused.value) and len(str(refused.value)) < 1000


def test_transaction_units_join_ids_sharing_a_topic_and_keep_selected_topics():
    writes = {"pay-tx": ["payments", "ledger"], "audit-tx": ["ledger", "audit"], "solo-tx": ["solo"],
              "outside-tx": ["solo", "not-migrated"], "other-tx": ["x", "y"]}
    units = transaction_units(writes, ["payments", "ledger", "audit", "solo", "x", "y"])
    assert [(u.name, sorted(u.topics)) for u in units] == [
        (TRANSACTIONS_PREFIX + "audit-tx,pay-tx", ["audit", "ledger", "payments"]),
        (TRANSACTIONS_PREFIX + "other-tx", ["x", "y"])]
    assert units[0].reason == "transactional.id audit-tx, pay-tx write them in the same transactions"
    assert units[1].reason == "transactional.id other-tx writes them in the same transactions"


@given(st.dictionaries(st.sampled_from([f"id{i}" for i in range(5)]), st.frozensets(topic_names)),
       st.frozensets(topic_names))
def test_transaction_units_are_the_connected_selected_topics(writes, selected):
    units = transaction_units(writes, selected)
    seen: set[str] = set()
    for u in units:
        assert len(u.topics) >= 2 and u.topics <= selected and not u.topics & seen
        seen |= u.topics
    for written in writes.values():  # every id's selected topics fall in one unit
        mine = set(written) & selected
        if len(mine) >= 2:
            assert sum(1 for u in units if mine <= u.topics) == 1


BASE = {"name": "m", "tenant": "t", "source": {"connection_id": "a", "alias": "a"},
        "destination": {"connection_id": "b", "alias": "b"}, "topics": {"include": [".*"]}}


def test_spec_declares_units_and_accepts_splits():
    spec = parse_spec({**BASE, "coupling": {"discover_transactions": False, "accept_split": ["orders"], "units": [
        {"name": "orders", "topics": ["orders", "order-lines"], "groups": ["billing"], "reason": "one order"}]}})
    assert spec.coupling.declared_units() == [
        CoupledUnit("orders", frozenset({"orders", "order-lines"}), frozenset({"billing"}), "one order")]
    assert spec.coupling.accept_split == ("orders",) and not spec.coupling.discover_transactions
    assert parse_spec(BASE).coupling.discover_transactions and parse_spec(BASE).coupling.units == ()


@pytest.mark.parametrize("coupling, field, words", [
    ({"units": [{"name": "u", "topics": ["a"]}]}, "coupling.units[0]", "at least two members"),
    ({"units": [{"name": "u", "topics": ["a b", "c"]}]}, "coupling.units[0].topics", "'a b' is not a legal"),
    ({"units": [{"name": "u", "topics": ["a", "a"]}]}, "coupling.units[0].topics", "'a' is listed twice"),
    ({"units": [{"name": "u", "topics": ["a"], "groups": ["g\n"]}]}, "coupling.units[0].groups", "control"),
    ({"units": [{"name": "u", "topics": ["a", "b"]}] * 2}, "coupling.units", "'u' is declared twice"),
    ({"accept_split": ["x", "x"]}, "coupling.accept_split", "'x' is listed twice"),
    ({"accept_split": [""]}, "coupling.accept_split", "printable"),
    ({"unit": []}, "coupling.unit", "did you mean 'units'"),
])
def test_bad_coupling_names_file_field_and_value(coupling, field, words):
    with pytest.raises(SpecError) as bad:
        parse_spec({**BASE, "coupling": coupling}, "tenant.yaml")
    assert "tenant.yaml" in str(bad.value) and f"field '{field}" in str(bad.value) and words in str(bad.value)


def test_a_unit_of_many_ids_has_a_bounded_name():
    writes = {f"id{i:02}": ["a", "b"] for i in range(12)}
    (unit,) = transaction_units(writes, ["a", "b"])
    assert unit.name == TRANSACTIONS_PREFIX + "id00,id01,id02,id03,id04,+7 more"
    assert unit.reason == "transactional.id id00, id01, id02, id03, id04 and 7 more write them in the same transactions"


def test_writers_beyond_the_migration():
    writes = {"pay": ["payments", "ledger"], "in": ["payments"], "out": ["x"]}
    assert writers_beyond(writes, ["payments"]) == {"pay": ["ledger"]}
