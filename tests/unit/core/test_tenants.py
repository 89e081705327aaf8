"""The platform's tenants file binds each tenant's specs to its connections, Secrets, state topics and topic
prefixes (issue 24: one tenant's spec could migrate with another team's connection)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from kafka_ferry.core.spec import load_spec
from kafka_ferry.core.spec_check import check_files, check_tenant
from kafka_ferry.core.spec_source import SpecError
from kafka_ferry.core.tenants import load_tenants, tenants_file_path

TENANTS = {"tenants": {
    "acme": {"connections": ["kafka_acme_src", "kafka_acme_dst", "spark_default"],
             "kubernetes_secrets": ["acme-creds"], "state_topics": ["kafka-ferry.acme-*"],
             "destination_topic_prefixes": ["acme."]},
    "globex": {"connections": ["kafka_globex_src", "kafka_globex_dst", "spark_default"],
               "state_topics": ["globex.state"], "destination_topic_prefixes": [""]},
}}


def spec_doc(**changes) -> dict:
    doc = {"name": "acme-orders", "tenant": "acme",
           "source": {"connection_id": "kafka_acme_src", "alias": "src"},
           "destination": {"connection_id": "kafka_acme_dst", "alias": "dst"},
           "topics": {"include": ["orders\\..*"], "rename": {"policy": "prefix", "prefix": "acme.orders."}}}
    doc.update(changes)
    return doc


@pytest.fixture()
def files(tmp_path):
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump(TENANTS))

    def write(file_stem: str, **changes):
        path = tmp_path / f"{file_stem}.yaml"
        path.write_text(yaml.safe_dump(spec_doc(**changes), sort_keys=False))
        return path
    return tenants, write


def refusals(spec_path, tenants, destination_topics=()):
    with pytest.raises(SpecError) as raised:
        check_tenant(load_spec(spec_path), spec_path, load_tenants(tenants), tenants, destination_topics)
    return [(p.field, p.value) for p in raised.value.problems]


def test_a_spec_within_its_grant_passes(files):
    tenants, write = files
    path = write("ok")
    check_tenant(load_spec(path), path, load_tenants(tenants), tenants)
    assert check_files([path], tenants)[1] == []


def test_another_teams_connection_secret_state_topic_and_prefix_are_each_named(files):
    tenants, write = files
    path = write("bad", source={"connection_id": "kafka_globex_src", "alias": "src"},
                 copy={"spark_connection_id": "spark_globex", "kubernetes_credentials_secret": "globex-creds:c"},
                 state_topic="globex.state",
                 topics={"include": ["x"], "rename": {"policy": "prefix", "prefix": "globex."}})
    assert sorted(refusals(path, tenants)) == sorted([
        ("source.connection_id", "kafka_globex_src"), ("copy.spark_connection_id", "spark_globex"),
        ("copy.kubernetes_credentials_secret", "globex-creds:c"), ("state_topic", "globex.state"),
        ("topics.rename.prefix", "globex.")])


def test_the_default_state_topic_and_identity_rename_are_checked_too(files):
    tenants, write = files
    path = write("identity", name="other-name", topics={"include": ["orders\\..*"]})
    problems = refusals(path, tenants, destination_topics=["acme.orders", "orders.eu"])
    assert ("name", "other-name") in problems  # kafka-ferry.other-name.state is not acme's
    assert ("topics.include", "orders.eu") in problems


def test_an_unknown_tenant_is_refused(files):
    tenants, write = files
    assert refusals(write("who", tenant="initech"), tenants) == [("tenant", "initech")]


def test_the_spec_check_cli_takes_the_tenants_file(files):
    tenants, write = files
    good = write("good")
    bad = write("bad", name="acme-bad", destination={"connection_id": "kafka_globex_dst", "alias": "dst"})
    done = subprocess.run([sys.executable, "-m", "kafka_ferry.core.spec_check", "check", "--tenants", str(tenants),
                           str(good), str(bad)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"ok: {good}" in done.stdout
    assert "field 'destination.connection_id' = 'kafka_globex_dst': tenant 'acme' may not use this connection" \
        in done.stdout
    without = subprocess.run([sys.executable, "-m", "kafka_ferry.core.spec_check", "check", str(good), str(bad)],
                             capture_output=True, text=True, timeout=120)
    assert without.returncode == 0, without.stdout  # no tenants file: behaviour as before


def test_a_bad_tenants_file_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "tenants.yaml"
    path.write_text("tenants:\n  acme:\n    connections: [ok]\n    state_topics: [\"bad name\"]\n")
    with pytest.raises(SpecError) as raised:
        load_tenants(path)
    assert raised.value.problems[0].line == 4 and raised.value.problems[0].field == "tenants.acme.state_topics[0]"
    path.write_text("a: &x [1]\nb: *x\n")
    with pytest.raises(SpecError, match="YAML anchor"):
        load_tenants(path)


def test_the_path_comes_from_the_airflow_config_else_the_environment():
    assert tenants_file_path({}) is None
    assert str(tenants_file_path({"KFERRY_TENANTS_FILE": "/etc/t.yaml"})) == "/etc/t.yaml"
    assert str(tenants_file_path({"KFERRY_TENANTS_FILE": "/etc/t.yaml"}, configured="/opt/a.yaml")) == "/opt/a.yaml"
