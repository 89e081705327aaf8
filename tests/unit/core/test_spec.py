"""The migration spec: valid files parse; each bad input fails naming file, field and value."""

from __future__ import annotations

import copy

import pytest
import yaml

from kafka_ferry.core.spec import SpecError, check_connections, load_spec, parse_spec

VALID = {
    "name": "acme-orders",
    "tenant": "acme",
    "source": {"connection_id": "kafka_src", "alias": "src"},
    "destination": {"connection_id": "kafka_dst", "alias": "dst"},
    "topics": {"include": ["orders\\..*"], "exclude": ["orders\\.tmp"], "rename": {"policy": "prefix", "prefix": "a."}},
    "groups": {"include": ["billing-.*"]},
    "copy": {"max_records_per_partition": 1000, "offset_sync_interval": 10},
    "schedule": "*/15 * * * *",
}


def with_change(path: str, value, delete: bool = False) -> dict:
    data = copy.deepcopy(VALID)
    *parents, last = path.split(".")
    target = data
    for part in parents:
        target = target.setdefault(part, {})
    if delete:
        del target[last]
    else:
        target[last] = value
    return data


def test_valid_spec_parses_with_defaults():
    spec = parse_spec(VALID, "acme.yaml")
    assert spec.dag_id == "kafka_ferry__acme-orders"
    assert spec.state_topic_name == "kafka-ferry.acme-orders.state"
    assert spec.topics.matches("orders.eu") and not spec.topics.matches("orders.tmp")
    assert not spec.topics.matches("xorders.eu")  # full match, not search
    assert spec.topics.rename.destination_topic("orders.eu") == "a.orders.eu"
    assert spec.copy_settings.provenance_headers is True
    assert spec.copy_settings.max_bytes_per_partition == 64 * 1024 * 1024


BAD_INPUTS = [
    ("missing tenant", with_change("tenant", None, delete=True), "tenant", None, "Field required"),
    ("missing source", with_change("source", None, delete=True), "source", None, "Field required"),
    ("bad include regex", with_change("topics.include", ["orders.(["]), "topics.include[0]", "orders.([",
     "not a valid regex"),
    ("bad exclude regex", with_change("groups.exclude", ["ok", "*bad"]), "groups.exclude[1]", "*bad",
     "not a valid regex"),
    ("unknown rename policy", with_change("topics.rename", {"policy": "suffix"}), "topics.rename",
     {"policy": "suffix"}, "does not match any of the expected tags"),
    ("illegal prefix", with_change("topics.rename", {"policy": "prefix", "prefix": "a/b"}), "topics.rename.prefix",
     "a/b", "prefix may hold only"),
    ("negative batch size", with_change("copy.max_records_per_partition", -5), "copy.max_records_per_partition", -5,
     "greater than 0"),
    ("zero sync interval", with_change("copy.offset_sync_interval", 0), "copy.offset_sync_interval", 0,
     "greater than 0"),
    ("bad connection id", with_change("source.connection_id", "my conn"), "source.connection_id", "my conn",
     "not a valid Airflow connection id"),
    ("unknown field", with_change("copy.max_recrods", 5), "copy.max_recrods", 5, "Extra inputs are not permitted"),
    ("same alias", with_change("destination.alias", "src"), "destination.alias", "src", "must differ"),
    ("same connection", with_change("destination.connection_id", "kafka_src"), "destination.connection_id",
     "kafka_src", "migration onto itself"),
    ("bad name", with_change("name", "Acme Orders"), "name", "Acme Orders", "must start with a lowercase"),
    ("bad cron", with_change("schedule", "every day"), "schedule", "every day", "5-field cron"),
    ("empty include", with_change("topics.include", []), "topics.include", [], "at least 1 item"),
    ("string batch size", with_change("copy.max_records_per_partition", "lots"), "copy.max_records_per_partition",
     "lots", "valid integer"),
    ("negative lag threshold", with_change("promotion.max_lag_records", -1), "promotion.max_lag_records", -1,
     "greater than or equal to 0"),
    ("bad alias", with_change("source.alias", "my.cluster"), "source.alias", "my.cluster", "cluster alias"),
]


@pytest.mark.parametrize(("label", "data", "field", "value", "problem"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_names_file_field_and_value(label, data, field, value, problem):
    with pytest.raises(SpecError) as raised:
        parse_spec(data, "migrations/acme.yaml")
    error = raised.value
    assert (error.path, error.field, error.value) == ("migrations/acme.yaml", field, value)
    assert problem in error.problem
    assert str(error).startswith(f"migrations/acme.yaml: field '{field}' = {value!r}: ")


def test_unknown_connection_id_is_named(tmp_path):
    spec = parse_spec(VALID)
    with pytest.raises(SpecError, match=r"acme.yaml: field 'destination.connection_id' = 'kafka_dst': no Airflow"):
        check_connections(spec, "acme.yaml", {"kafka_src", "spark_default"})
    check_connections(spec, "acme.yaml", {"kafka_src", "kafka_dst", "spark_default"})


def test_load_spec_reports_yaml_syntax_errors_with_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\ntopics: [unclosed\n")
    with pytest.raises(SpecError, match=r"broken.yaml: field 'line \d+'.*not valid YAML"):
        load_spec(path)


def test_load_spec_reports_a_non_mapping_and_a_missing_file(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(SpecError, match="must be a YAML mapping"):
        load_spec(path)
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "absent.yaml")


def test_round_trip_through_yaml_file(tmp_path):
    path = tmp_path / "acme.yaml"
    path.write_text(yaml.safe_dump(VALID))
    assert load_spec(path) == parse_spec(VALID)


def test_spec_is_frozen():
    spec = parse_spec(VALID)
    with pytest.raises(Exception, match="frozen"):
        spec.name = "other"
