"""promotion.units without a cluster: the spec's declared units as the pre-flight keeps, shows and checks them (the
transaction log's side runs on the test bed: tests/integration/test_transaction_coupling.py)."""

from __future__ import annotations

import logging

import pytest

from kafka_ferry.cli.summary import coupling_lines
from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.core.units.coupling import UnitSplitRefused
from kafka_ferry.promotion.units import check_staged_units, migration_units


def spec_with(coupling: dict):
    return parse_spec({"name": "m", "tenant": "t", "source": {"connection_id": "a", "alias": "a"},
                       "destination": {"connection_id": "b", "alias": "b"}, "topics": {"include": [".*"]},
                       "coupling": {"discover_transactions": False, **coupling}})


ORDERS = {"name": "orders", "topics": ["orders", "order-lines"], "groups": ["billing"], "reason": "one order"}
ELSEWHERE = {"name": "elsewhere", "topics": ["x", "y"]}


def test_declared_units_touching_the_migration_are_kept_and_shown():
    # the log is not read (discover_transactions: false): no cluster is asked, so None stands for the source
    units = migration_units(spec_with({"units": [ORDERS, ELSEWHERE]}), None, ["orders", "order-lines", "z"],
                            ["billing"])
    assert [u.name for u in units.units] == ["orders"] and not units.log_read
    assert units.notes == ("unit elsewhere (coupling.units) names nothing this migration moves: ignored",)
    doc = units.as_dict()
    assert doc["units"] == [{"name": "orders", "topics": ["order-lines", "orders"], "groups": ["billing"],
                             "reason": "one order"}]
    assert coupling_lines(doc) == [
        "coupling: transaction log not read (coupling.discover_transactions: false); only the units the spec "
        "declares count",
        "coupled unit orders (one order): topic order-lines, topic orders, group billing",
        "coupling: unit elsewhere (coupling.units) names nothing this migration moves: ignored"]
    assert units.lines()[1:2] == coupling_lines(doc)[1:2]
    assert coupling_lines(None) == []


def test_a_unit_partly_outside_the_migration_is_noted():
    units = migration_units(spec_with({"units": [ORDERS]}), None, ["orders"], ["billing"])
    assert units.notes == ("unit orders: order-lines not part of this migration (the unit can only move whole if "
                           "the spec selects them too)",)


def test_staged_check_refuses_a_split_unless_the_spec_accepts_it(caplog):
    units = migration_units(spec_with({"units": [ORDERS]}), None, ["orders", "order-lines"], ["billing"])
    with pytest.raises(UnitSplitRefused, match="promote-groups refused before any change: .*unit 'orders' "
                                               r"\(one order\): this step moves group billing and would leave "
                                               "topics order-lines, orders behind"):
        check_staged_units(spec_with({"units": [ORDERS]}), units, "promote-groups", groups=["billing"])
    assert check_staged_units(spec_with({"units": [ORDERS]}), units, "promote-groups", groups=["billing"],
                              promoted_topics=["orders", "order-lines"]) == []
    with caplog.at_level(logging.WARNING, logger="kafka_ferry.promotion.units"):
        (split,) = check_staged_units(spec_with({"units": [ORDERS], "accept_split": ["orders"]}), units,
                                      "promote-topics", topics=["orders"])
    assert split.left_topics == {"order-lines"} and split.left_groups == {"billing"}
    assert "accepted by the spec (coupling.accept_split)" in caplog.text
