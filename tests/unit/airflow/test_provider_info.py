"""The provider metadata Airflow reads (`kafka_ferry.provider_info`): valid by Airflow's own schemas, naming hooks
that import, and a connection type Airflow can print as a URI."""

from __future__ import annotations

import json
import re
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

import airflow
import jsonschema

from kafka_ferry.core.specs.connection_types import EVIDENCE_SIGNING, LEGACY_SCHEMA_REGISTRY, SCHEMA_REGISTRY
from kafka_ferry.provider_info import get_provider_info

AIRFLOW_DIR = Path(airflow.__file__).parent


def test_the_provider_info_is_valid_by_airflows_runtime_and_provider_yaml_schemas():
    info = get_provider_info()
    jsonschema.validate(info, json.loads((AIRFLOW_DIR / "provider_info.schema.json").read_text()))
    yaml_schema = json.loads((AIRFLOW_DIR / "provider.yaml.schema.json").read_text())
    connection_type_schema = yaml_schema["properties"]["connection-types"]  # the strict one: form fields, behaviour
    jsonschema.validate(info["connection-types"], connection_type_schema)


def test_the_entry_point_points_at_it_and_the_plugin_is_not_registered_a_second_time_by_it():
    found = [ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("kafka_ferry.")]
    assert [ep.load() for ep in found] == [get_provider_info]
    assert "plugins" not in get_provider_info()  # the `airflow.plugins` entry point registers it, once


def test_every_hook_named_imports_and_has_the_connection_type_it_is_registered_for():
    for entry in get_provider_info()["connection-types"]:
        module, _, name = entry["hook-class-name"].rpartition(".")
        hook = getattr(import_module(module), name)
        assert hook.conn_type == entry["connection-type"]
        assert hook.hook_name == entry["hook-name"]
        assert "get_ui_field_behaviour" not in vars(hook)  # deprecated in Airflow 3.2: declared in the metadata


def test_the_types_are_uri_schemes_and_the_registrys_first_name_is_only_an_alias():
    types = [entry["connection-type"] for entry in get_provider_info()["connection-types"]]
    assert types == [SCHEMA_REGISTRY, EVIDENCE_SIGNING]  # the evidence bundle's signing key (core.cutover.evidence)
    assert all(re.fullmatch(r"[a-z][a-z0-9+.]*", t) for t in types)  # RFC 3986 scheme, without Airflow's '-'->'_'
    assert LEGACY_SCHEMA_REGISTRY not in types
