"""Input that sizes work is bounded, checked in linear time, and refused with a bounded message (issue 36, case 7).

Reproductions: promotion timeouts of 3e9 s were accepted (a sensor timeout of 34,722 days); ``promote-groups`` with
4,000 names passed pre-flight (a check quadratic in the names, a 65 KB error); the trigger form embedded every
ready group name (1.5 MB per DAG at 50k groups).
"""

from __future__ import annotations

import json

import pytest
import yaml

from kafka_ferry.core.cutover.staged_cutover import StagedCutoverError, validate_selection
from kafka_ferry.core.specs.spec import SpecError, load_spec
from kafka_ferry.core.specs.trigger_form import MAX_NAMES, TriggerRefused, check_trigger

SPEC = {"name": "orders", "tenant": "acme", "source": {"connection_id": "src", "alias": "a"},
        "destination": {"connection_id": "dst", "alias": "b"}, "topics": {"include": ["x"]}}


@pytest.mark.parametrize("field, value", [("sensor_timeout_seconds", 3_000_000_000),
                                          ("poke_interval_seconds", 86_400),
                                          ("quiesce_window_seconds", 10 ** 9)])
def test_promotion_timeouts_are_capped_naming_file_field_and_value(tmp_path, field, value):
    path = tmp_path / "orders.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "promotion": {field: value}}))
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    assert f"{path}" in str(raised.value) and f"field 'promotion.{field}' = {value}" in str(raised.value)
    assert "less than or equal to" in str(raised.value)


def test_the_week_long_bounds_still_pass(tmp_path):
    path = tmp_path / "orders.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "promotion": {"sensor_timeout_seconds": 7 * 24 * 3600,
                                                          "poke_interval_seconds": 3600,
                                                          "quiesce_window_seconds": 24 * 3600}}))
    assert load_spec(path).promotion.sensor_timeout_seconds == 7 * 24 * 3600


@pytest.mark.parametrize("mode, field", [("promote-groups", "groups"), ("promote-topics", "topics"),
                                         ("promote-topics", "waive_groups"), ("catch-up", "groups"),
                                         ("rollback", "groups")])
def test_name_lists_are_capped_in_every_mode_with_a_bounded_message(mode, field):
    params = {"mode": mode, "confirm_migration": "orders", "groups": ["g"], "topics": ["t"],
              field: [f"name-{i}" for i in range(4000)]}
    with pytest.raises(TriggerRefused) as raised:
        check_trigger("orders", params)
    assert f"{field!r} names 4000 units; at most {MAX_NAMES} per run" in str(raised.value)
    assert len(str(raised.value)) < 2000


def test_a_text_field_and_each_name_are_bounded_too():
    with pytest.raises(TriggerRefused, match="characters long"):
        check_trigger("orders", {"mode": "catch-up", "groups": "g\n" * 2_000_000})
    with pytest.raises(TriggerRefused, match=r"1 name\(s\) longer than 1000 characters") as raised:
        check_trigger("orders", {"mode": "promote-groups", "confirm_migration": "orders", "groups": ["g" * 5000]})
    assert len(str(raised.value)) < 2000


class CountedIterable:
    """The migrated names, counting how often they are read: a check reading them per requested name is
    quadratic."""

    def __init__(self, items):
        self.items, self.reads = list(items), 0

    def __iter__(self):
        self.reads += 1
        return iter(self.items)


def test_the_selection_check_reads_the_migrated_names_once_and_says_a_bounded_message():
    migrated = CountedIterable(f"group-{i}" for i in range(4000))
    with pytest.raises(StagedCutoverError) as raised:
        validate_selection("groups", [f"unknown-{i}" for i in range(4000)], migrated)
    assert migrated.reads == 1
    message = str(raised.value)
    assert len(message) < 1000 and "and 3995 more" in message
    migrated = CountedIterable(["a", "b"])
    assert validate_selection("groups", ["b", "a"], migrated) == ["a", "b"] and migrated.reads == 1


def test_the_trigger_form_offers_a_bounded_number_of_ready_groups():
    from kafka_ferry.dag_promotion import FORM_GROUPS, trigger_params

    ready = [f"consumer-group-of-a-service-{i:05d}" for i in range(50_000)]
    params = trigger_params("orders", ready, 1_700_000_000_000)
    groups = params["groups"].serialize()
    size = len(json.dumps(groups))
    assert size < 10_000, size
    assert groups["schema"]["examples"] == ready[:FORM_GROUPS]
    assert f"and {50_000 - FORM_GROUPS} more" in groups["description"]


@pytest.mark.parametrize("field", ["groups", "topics", "waive_groups"])
def test_the_forms_schema_bounds_each_name_list(field):
    """A REST trigger with a longer list is refused by Airflow's own Param check, before the run exists."""
    from airflow.sdk.definitions.param import ParamValidationError

    from kafka_ferry.dag_promotion import trigger_params

    param = trigger_params("orders")[field]
    assert param.serialize()["schema"]["maxItems"] == MAX_NAMES
    assert param.resolve([f"n{i}" for i in range(MAX_NAMES)]) is not None
    with pytest.raises(ParamValidationError):
        param.resolve([f"n{i}" for i in range(MAX_NAMES + 1)])
