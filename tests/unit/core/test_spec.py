"""The migration spec: valid files parse; each bad input fails naming file, field and value."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from kafka_ferry.core.specs.spec import SpecError, load_spec, parse_spec
from kafka_ferry.core.specs.spec_check import check_connections

VALID: dict[str, Any] = {  # a spec document as YAML loads it: JSON values
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
    ("missing tenant", with_change("tenant", None, delete=True),
     "field 'tenant' is missing: required, and has no default"),
    ("missing source", with_change("source", None, delete=True),
     "field 'source' is missing: required, and has no default"),
    ("bad include regex", with_change("topics.include", ["orders.(["]),
     "field 'topics.include[0]' = 'orders.([': not a valid regex: unterminated character set at position 8"),
    ("bad exclude regex", with_change("groups.exclude", ["ok", "*bad"]),
     "field 'groups.exclude[1]' = '*bad': not a valid regex: nothing to repeat at position 0"),
    ("unknown rename policy", with_change("topics.rename", {"policy": "suffix"}),
     "field 'topics.rename' = {'policy': 'suffix'}: Input tag 'suffix' found using 'policy' does not match any of "
     "the expected tags: 'identity', 'prefix'"),
    ("illegal prefix", with_change("topics.rename", {"policy": "prefix", "prefix": "a/b"}),
     "field 'topics.rename.prefix' = 'a/b': prefix may hold only letters, digits, '.', '_' and '-'"),
    ("unknown rename key", with_change("topics.rename", {"policy": "prefix", "prefix": "a.", "prefx": "b"}),
     "field 'topics.rename.prefx' = 'b': unknown key (did you mean 'prefix'?); known here: policy, prefix"),
    ("negative batch size", with_change("copy.max_records_per_partition", -5),
     "field 'copy.max_records_per_partition' = -5: Input should be greater than 0"),
    ("zero sync interval", with_change("copy.offset_sync_interval", 0),
     "field 'copy.offset_sync_interval' = 0: Input should be greater than 0"),
    ("bad connection id", with_change("source.connection_id", "my conn"),
     "field 'source.connection_id' = 'my conn': not a valid Airflow connection id (letters, digits, '-', '_', '.')"),
    ("unknown field", with_change("copy.max_recrods_per_partition", 5),
     "field 'copy.max_recrods_per_partition' = 5: unknown key (did you mean 'max_records_per_partition'?); known "
     "here: accept_retention_gaps, credentials_file, fast_driver_start, kubernetes_credentials_secret, "
     "lanes_per_task, max_bytes_per_partition, max_bytes_per_second, max_records_per_partition, "
     "max_records_per_second, offset_sync_interval, provenance_headers, spark_connection_id, window"),
    ("bad window", with_change("copy.window", "4 hours"),
     "field 'copy.window' = '4 hours': window '4 hours' is neither a duration ('4h', '90min', "
     "'1h30min', '45s') nor an end time ('05:00', 24-hour HH:MM in the DAG's timezone)"),
    ("window past the copy timeout", with_change("copy.window", "7h"),
     "field 'copy.window' = '7h': is 25200 s, longer than timeouts.copy_seconds (21600 s): the copy task would "
     "time out before its deadline; shorten the window or raise the timeout"),
    ("zero rate limit", with_change("copy.max_bytes_per_second", 0),
     "field 'copy.max_bytes_per_second' = 0: Input should be greater than 0"),
    ("unknown top-level field", with_change("shedule", "@daily"),
     "field 'shedule' = '@daily': unknown key (did you mean 'schedule'?); known here: acls, applications, "
     "consumers, copy, coupling, description, destination, evidence, groups, name, promotion, schedule, "
     "schema_registry, source, state_topic, tenant, timeouts, topics"),
    ("same alias", with_change("destination.alias", "src"), "field 'destination.alias' = 'src': must differ from "
     "source.alias"),
    ("same connection", with_change("destination.connection_id", "kafka_src"),
     "field 'destination.connection_id' = 'kafka_src': source and destination use the same connection: a "
     "migration onto itself"),
    ("bad name", with_change("name", "Acme Orders"),
     "field 'name' = 'Acme Orders': name must start with a lowercase letter or digit and hold only a-z, 0-9, "
     "'_', '-'"),
    # issue 36 case 2: <work base>/jvm holds the driver JVM's archive and the Spark home mirrors of every migration
    ("reserved name", with_change("name", "jvm"),
     "field 'name' = 'jvm': 'jvm' is reserved: kafka-ferry keeps a directory of that name beside the migrations' "
     "work dirs (the driver JVM's class-data archive and the Spark home mirrors); choose another name"),
    ("bad cron", with_change("schedule", "every day"),
     "field 'schedule' = 'every day': schedule must be a 5-field cron expression, an @preset, or null"),
    ("empty include", with_change("topics.include", []), "field 'topics.include' = []: needs at least 1 item(s)"),
    ("string batch size", with_change("copy.max_records_per_partition", "lots"),
     "field 'copy.max_records_per_partition' = 'lots': Input should be a valid integer, unable to parse string as "
     "an integer"),
    ("negative lag threshold", with_change("promotion.max_lag_records", -1),
     "field 'promotion.max_lag_records' = -1: Input should be greater than or equal to 0"),
    ("offset syncs on the source", with_change("offset_syncs_topic_location", "source"),
     "field 'offset_syncs_topic_location' = 'source': not supported: offset syncs are written to the destination"),
    ("bad alias", with_change("source.alias", "my.cluster"),
     "field 'source.alias' = 'my.cluster': cluster alias must be 1-64 letters, digits, '_' or '-' (it names MM2 "
     "topics)"),
]


@pytest.mark.parametrize(("label", "data", "message"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_names_file_field_and_value(label, data, message):
    with pytest.raises(SpecError) as raised:
        parse_spec(data, "migrations/acme.yaml")
    assert str(raised.value) == f"migrations/acme.yaml: {message}"
    assert len(raised.value.problems) == 1


def test_every_problem_of_a_document_is_reported_at_once():
    data = with_change("name", "Bad Name")
    data["topics"]["include"] = ["orders.(["]
    data["copy"] = {"max_records_per_partition": -5, "max_recrods": 5}
    data["schedule"] = "every minute"
    del data["tenant"]

    with pytest.raises(SpecError) as raised:
        parse_spec(data, "acme.yaml")

    # data without a file has no lines: the problems are sorted by field
    assert [p.field for p in raised.value.problems] == [
        "copy.max_records_per_partition", "copy.max_recrods", "name", "schedule", "tenant", "topics.include[0]"]
    assert str(raised.value).splitlines()[0] == "acme.yaml: 6 problems in this migration spec"


def test_missing_connections_are_all_named_with_their_fields():
    spec = parse_spec(VALID)
    with pytest.raises(SpecError) as raised:
        check_connections(spec, "acme.yaml", {"kafka_src": "kafka"})
    assert str(raised.value) == (
        "acme.yaml: 2 problems in this migration spec\n"
        "acme.yaml: field 'copy.spark_connection_id' = 'spark_default': no Airflow connection with this id\n"
        "acme.yaml: field 'destination.connection_id' = 'kafka_dst': no Airflow connection with this id")
    check_connections(spec, "acme.yaml", {"kafka_src": "kafka", "kafka_dst": "kafka", "spark_default": "spark"})


def test_a_connection_of_the_wrong_type_is_named(tmp_path):
    path = tmp_path / "acme.yaml"
    path.write_text(yaml.safe_dump(VALID, sort_keys=False))
    spec = load_spec(path)
    with pytest.raises(SpecError) as raised:
        check_connections(spec, path, {"kafka_src": "kafka", "kafka_dst": "http", "spark_default": "spark"})
    assert str(raised.value) == (
        f"{path}:7: field 'destination.connection_id' = 'kafka_dst': the connection is of type 'http'; this field "
        "needs a connection of type 'kafka'")


def test_the_spark_field_takes_a_spark_or_a_spark_connect_connection_and_names_both_when_wrong(tmp_path):
    path = tmp_path / "acme.yaml"
    path.write_text(yaml.safe_dump(VALID, sort_keys=False))
    spec = load_spec(path)
    check_connections(spec, path, {"kafka_src": "kafka", "kafka_dst": "kafka", "spark_default": "spark_connect"})
    with pytest.raises(SpecError) as raised:
        check_connections(spec, path, {"kafka_src": "kafka", "kafka_dst": "kafka", "spark_default": "kafka"})
    assert str(raised.value).endswith(
        "field 'copy.spark_connection_id' = 'spark_default': the connection is of type 'kafka'; this field "
        "needs a connection of type 'spark' or 'spark_connect'")


def test_a_registry_connection_of_the_new_or_the_first_type_name_is_taken_and_a_wrong_one_names_the_new():
    spec = parse_spec({**VALID, "schema_registry": {"source_connection_id": "sr_old",
                                                    "destination_connection_id": "sr_new", "mode": "remap"}})
    kafka = {"kafka_src": "kafka", "kafka_dst": "kafka", "spark_default": "spark"}
    check_connections(spec, "acme.yaml", {**kafka, "sr_old": "schema_registry", "sr_new": "schemaregistry"})
    with pytest.raises(SpecError) as raised:
        check_connections(spec, "acme.yaml", {**kafka, "sr_old": "http", "sr_new": "schemaregistry"})
    assert str(raised.value) == (
        "acme.yaml: field 'schema_registry.source_connection_id' = 'sr_old': the connection is of type 'http'; "
        "this field needs a connection of type 'schemaregistry'")


def test_a_missing_connection_id_says_which_known_id_was_meant_and_only_a_close_one():
    spec = parse_spec(VALID)
    found = {"kafka_src": "kafka", "spark_default": "spark"}
    with pytest.raises(SpecError) as raised:
        check_connections(spec, "acme.yaml", found, known_ids=["kafka_src", "kafka_dest", "spark_default", "x"])
    assert str(raised.value) == ("acme.yaml: field 'destination.connection_id' = 'kafka_dst': no Airflow connection "
                                 "with this id (did you mean 'kafka_dest'?)")
    with pytest.raises(SpecError) as raised:
        check_connections(spec, "acme.yaml", found, known_ids=["postgres_default", "spark_local"])
    assert str(raised.value).endswith("'kafka_dst': no Airflow connection with this id")


def test_load_spec_reports_a_non_mapping_an_empty_and_a_missing_file(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    assert str(raised.value) == f"{path}:1: field '<root>' = 'list': the spec must be a YAML mapping (key: value lines)"
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    with pytest.raises(SpecError) as raised:
        load_spec(tmp_path / "empty.yaml")
    assert str(raised.value) == f"{tmp_path / 'empty.yaml'}: the file is empty: a migration spec is a YAML mapping"
    with pytest.raises(SpecError) as raised:
        load_spec(tmp_path / "absent.yaml")
    assert str(raised.value) == f"{tmp_path / 'absent.yaml'}: cannot read: No such file or directory"


def test_round_trip_through_yaml_file(tmp_path):
    path = tmp_path / "acme.yaml"
    path.write_text(yaml.safe_dump(VALID))
    assert load_spec(path) == parse_spec(VALID)


def test_spec_is_frozen():
    spec = parse_spec(VALID)
    with pytest.raises(Exception, match="frozen"):
        field = "name"  # set by name: the model's type already says it is read-only, this proves it at run time
        setattr(spec, field, "other")
