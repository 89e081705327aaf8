"""The platform's tenants file binds each tenant's specs to its connections, Secrets, state topics and topic
prefixes (issue 24: one tenant's spec could migrate with another team's connection)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.core.specs.spec_check import check_files, check_tenant
from kafka_ferry.core.specs.spec_source import SpecError
from kafka_ferry.core.specs.tenants import load_tenants, tenants_file_path

TENANTS = {"tenants": {
    "acme": {"spec_paths": ["*.yaml"], "name_prefixes": ["acme-"],
             "connections": ["kafka_acme_src", "kafka_acme_dst", "spark_default"],
             "kubernetes_secrets": ["acme-creds"], "state_topics": ["kafka-ferry.acme-*"],
             "destination_topic_prefixes": ["acme."]},
    "globex": {"spec_paths": ["globex/*.yaml"], "name_prefixes": ["globex-"],
               "connections": ["kafka_globex_src", "kafka_globex_dst", "spark_default"],
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
    done = subprocess.run([sys.executable, "-m", "kafka_ferry.core.specs.spec_check", "check", "--tenants",
                           str(tenants), str(good), str(bad)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"ok: {good}" in done.stdout
    assert "field 'destination.connection_id' = 'kafka_globex_dst': tenant 'acme' may not use this connection" \
        in done.stdout
    without = subprocess.run([sys.executable, "-m", "kafka_ferry.core.specs.spec_check", "check", str(good), str(bad)],
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


# --- issue 36 (case 1): what a spec's author cannot choose binds it ----------------------------------------------

def globex_file(tmp_path, stem: str, **changes):
    (tmp_path / "globex").mkdir(exist_ok=True)
    path = tmp_path / "globex" / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(spec_doc(**changes), sort_keys=False))
    return path


def test_a_spec_claiming_another_tenant_is_refused_by_its_place(files, tmp_path):
    """Reproduction: globex's team wrote `tenant: acme` with acme's connections; `check --tenants` said ok."""
    tenants, _ = files
    path = globex_file(tmp_path, "orders")  # acme's name, tenant, connections: only the file's place is globex's
    problems = refusals(path, tenants)
    assert problems == [("tenant", "acme")]
    with pytest.raises(SpecError, match=r"belongs to tenant 'globex' \(by its spec_paths"):
        check_tenant(load_spec(path), path, load_tenants(tenants), tenants)
    assert check_files([path], tenants)[0] == []


def test_a_name_outside_the_tenants_prefixes_is_refused(files):
    tenants, write = files
    path = write("named", name="globex-orders")  # globex's name (its DAG id, work dir, lease), acme's file
    assert ("name", "globex-orders") in refusals(path, tenants)
    with pytest.raises(SpecError, match=r"migration names of tenant 'acme' start with one of \['acme-'\]"):
        check_tenant(load_spec(path), path, load_tenants(tenants), tenants)


def test_a_spec_file_no_tenant_owns_is_refused(tmp_path):
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"tenants": {"acme": {**TENANTS["tenants"]["acme"],
                                                            "spec_paths": ["acme/*.yaml"]}}}))
    path = tmp_path / "stray.yaml"
    path.write_text(yaml.safe_dump(spec_doc()))
    with pytest.raises(SpecError, match="is in no tenant's spec_paths"):
        check_tenant(load_spec(path), path, load_tenants(tenants), tenants)


def test_spec_root_and_globs_match_part_by_part(tmp_path):
    root = tmp_path / "dags"
    (root / "migrations" / "deep").mkdir(parents=True)
    tenants = tmp_path / "etc" / "tenants.yaml"
    tenants.parent.mkdir()
    tenants.write_text(yaml.safe_dump({"spec_root": str(root), "tenants": {
        "acme": {"spec_paths": ["migrations/acme-*.yaml"], "name_prefixes": ["acme-"]}}}))
    loaded = load_tenants(tenants)
    assert loaded.owners(root / "migrations" / "acme-x.yaml", tenants) == ["acme"]
    assert loaded.owners(root / "migrations" / "deep" / "acme-x.yaml", tenants) == []  # '*' never crosses '/'
    assert loaded.owners(root / "migrations" / "deep" / ".." / "acme-y.yaml", tenants) == ["acme"]  # resolved
    assert loaded.owner_path(root / "migrations" / "acme-x.yaml", tenants) == "migrations/acme-x.yaml"


@pytest.mark.parametrize("grant, message", [
    ({"a": {"name_prefixes": ["acme"]}, "b": {"name_prefixes": ["acme-eu"]}}, "overlap"),
    ({"a": {"name_prefixes": ["x", "acme-1"]}, "b": {"name_prefixes": ["acme-2", "acme-"]}}, "overlap"),
    ({"a": {"name_prefixes": ["Acme"]}}, "name prefix"),
    ({"a": {"spec_paths": ["../other/*.yaml"]}}, "'..'"),
    ({"a": {"spec_paths": ["**/x.yaml"]}}, r"'\*\*'"),
])
def test_a_tenants_file_that_cannot_bind_is_refused(tmp_path, grant, message):
    path = tmp_path / "tenants.yaml"
    path.write_text(yaml.safe_dump({"tenants": grant}))
    with pytest.raises(SpecError, match=message):
        load_tenants(path)


def test_prefixes_of_one_tenant_may_nest(tmp_path):
    path = tmp_path / "tenants.yaml"
    path.write_text(yaml.safe_dump({"tenants": {"a": {"name_prefixes": ["acme-", "acme-eu-"]},
                                                "b": {"name_prefixes": ["globex-"]}}}))
    loaded = load_tenants(path)
    assert (loaded.name_holder("acme-eu-1"), loaded.name_holder("globex-x"), loaded.name_holder("x")) == (
        "a", "b", None)


def test_a_duplicate_name_in_the_folder_is_refused_naming_both_files(tmp_path):
    """Reproduction: duplicates were caught only among the files given to one call."""
    first = tmp_path / "orders-a.yaml"
    second = tmp_path / "orders-b.yaml"
    first.write_text(yaml.safe_dump(spec_doc()))
    second.write_text(yaml.safe_dump(spec_doc()))
    valid, errors = check_files([first])  # the other file is in the same folder, not given
    assert valid == []
    assert f"field 'name' = 'acme-orders': {second} has this name too" in str(errors[0])
    valid, errors = check_files([first, second])
    assert valid == [] and [e.path for e in errors] == [str(first), str(second)]
    assert str(first) in str(errors[1]) and str(second) in str(errors[0])


def test_another_tenants_twin_does_not_take_the_name_away(tmp_path):
    """With the tenants file, a file of globex's holding acme's name is refused itself, and acme's spec stays valid
    (else adding a twin would take any tenant's DAG away); without it, both are refused, naming each other."""
    grants = {name: {**TENANTS["tenants"][name], "spec_paths": [f"{name}-*.yaml"]} for name in ("acme", "globex")}
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(yaml.safe_dump({"tenants": grants}))
    own, twin = tmp_path / "acme-own.yaml", tmp_path / "globex-twin.yaml"
    own.write_text(yaml.safe_dump(spec_doc()))
    twin.write_text(yaml.safe_dump(spec_doc()))  # acme's name, tenant and connections, in globex's place
    assert check_files([own], tenants) == ([f"ok: {own} (DAG kafka_ferry__acme-orders)"], [])
    assert check_files([twin], tenants)[0] == []
    assert f"{twin} has this name too" in str(check_files([own])[1][0])


def test_the_state_topics_owner_is_the_first_spec_file():
    from kafka_ferry.core.specs.tenants import owner_problem, owner_record

    spec = load_spec_doc(spec_doc())
    recorded = owner_record(spec, "migrations/acme-orders.yaml")
    assert owner_problem(None, spec, "migrations/acme-orders.yaml", "s") is None
    assert owner_problem(recorded, spec, "migrations/acme-orders.yaml", "s") is None
    moved = owner_problem(recorded, spec, "migrations/elsewhere.yaml", "kafka-ferry.acme-orders.state")
    assert moved is not None
    assert moved.startswith("state topic 'kafka-ferry.acme-orders.state' belongs to spec file "
                            "'migrations/acme-orders.yaml' of tenant 'acme' (recorded by its first run); this run is "
                            "from 'migrations/elsewhere.yaml' of tenant 'acme': refused before any change")
    other = load_spec_doc(spec_doc(tenant="globex"))
    foreign = owner_problem(recorded, other, "migrations/acme-orders.yaml", "s")
    assert foreign is not None and "of tenant 'globex'" in foreign


def load_spec_doc(doc):
    from kafka_ferry.core.specs.spec import parse_spec

    return parse_spec(doc, "spec.yaml", {})
