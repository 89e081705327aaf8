"""The schema migration planner: order (invariant A), idempotence (B), conflicts (C), ids (D)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_ferry.core.schemas.schema_forms import canonical
from kafka_ferry.core.schemas.schema_plan import (
    Reference,
    Register,
    RegistrySnapshot,
    SchemaPlanError,
    SchemaVersion,
    SetCompatibility,
    SetMode,
    Subject,
    plan_schemas,
)

ADDRESS = '{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}'
ORDER_V1 = '{"type":"record","name":"Order","fields":[{"name":"to","type":"Address"}]}'
ORDER_V2 = ('{"type":"record","name":"Order","fields":[{"name":"to","type":"Address"},'
            '{"name":"n","type":"int","default":0}]}')


def v(subject, version, schema_id, schema, refs=(), deleted=False, schema_type="AVRO"):
    return SchemaVersion(subject, version, schema_id, schema, schema_type, tuple(refs), deleted)


def source_registry() -> RegistrySnapshot:
    addr = Subject("address", (v("address", 1, 11, ADDRESS),), compatibility="FULL")
    orders = Subject("orders-value", (
        v("orders-value", 1, 21, ORDER_V1, [Reference("Address", "address", 1)]),
        v("orders-value", 2, 22, ORDER_V2, [Reference("Address", "address", 1)]),
        v("orders-value", 3, 23, ORDER_V2.replace('"n"', '"m"'), [Reference("Address", "address", 1)], deleted=True),
    ))
    return RegistrySnapshot({"address": addr, "orders-value": orders}, compatibility="BACKWARD")


EMPTY = RegistrySnapshot({})


def registered(plan):
    return [(r.subject, r.version) for r in plan.registrations]


def test_referenced_subjects_come_first_and_versions_in_order():
    plan = plan_schemas(source_registry(), EMPTY, ["orders-value"], "preserve")
    assert registered(plan) == [("address", 1), ("orders-value", 1), ("orders-value", 2)]
    assert [r.requested_id for r in plan.registrations] == [11, 21, 22]
    assert not plan.conflicts


def test_preserve_wraps_writes_in_import_mode_and_restores_settings_afterwards():
    actions = plan_schemas(source_registry(), EMPTY, ["orders-value"], "preserve").actions
    first_register = next(i for i, a in enumerate(actions) if isinstance(a, Register))
    assert SetMode("address", "IMPORT") in actions[:first_register]
    assert SetMode("orders-value", "READWRITE") in actions[first_register:]
    assert SetCompatibility("address", "FULL") in actions[first_register:]
    assert SetCompatibility("orders-value", "BACKWARD") in actions[first_register:]
    assert not any(isinstance(a, SetCompatibility) and a.subject is None for a in actions)  # not asked to move it


def test_the_global_level_moves_only_when_the_spec_asks():
    moved = plan_schemas(source_registry(), EMPTY, ["orders-value"], "preserve", move_global=True).actions
    assert SetCompatibility(None, "BACKWARD") in moved


def test_a_subject_following_the_global_level_gets_the_sources_effective_level_on_another_global():
    """orders-value has no level of its own (source global BACKWARD); the destination's global is NONE."""
    dst = RegistrySnapshot({}, compatibility="NONE")
    first = plan_schemas(source_registry(), dst, ["orders-value"], "remap")
    assert SetCompatibility("orders-value", "BACKWARD") in first.actions
    after = destination_after(first, source_registry())
    after = RegistrySnapshot(after.subjects, "NONE")
    assert plan_schemas(source_registry(), after, ["orders-value"], "remap").actions == ()
    # already there, untouched, but following another global level: its level is set, nothing registered
    bare = RegistrySnapshot({s: Subject(s, sub.versions, None) for s, sub in after.subjects.items()}, "NONE")
    again = plan_schemas(source_registry(), bare, ["orders-value"], "remap")
    assert set(again.actions) == {SetCompatibility("orders-value", "BACKWARD"), SetCompatibility("address", "FULL")}
    # the same global level on the destination: a subject following it needs nothing
    same = RegistrySnapshot(bare.subjects, "BACKWARD")
    assert plan_schemas(source_registry(), same, ["orders-value"], "remap").actions == (
        SetCompatibility("address", "FULL"),)


def test_soft_deleted_versions_only_on_request_and_deleted_again():
    plan = plan_schemas(source_registry(), EMPTY, ["orders-value"], "preserve", include_deleted=True)
    last = plan.registrations[-1]
    assert (last.subject, last.version, last.soft_delete_after) == ("orders-value", 3, True)


def test_remap_asks_no_ids_and_renames_subjects_and_references():
    plan = plan_schemas(source_registry(), EMPTY, ["orders-value"], "remap",
                        subject_map={"orders-value": "eu.orders-value", "address": "eu.address"})
    assert registered(plan) == [("eu.address", 1), ("eu.orders-value", 1), ("eu.orders-value", 2)]
    assert all(r.requested_id is None for r in plan.registrations)
    assert plan.registrations[1].references == (Reference("Address", "eu.address", 1),)
    assert not any(isinstance(a, SetMode) for a in plan.actions)


def test_remap_numbers_versions_densely_when_the_source_has_gaps():
    other = ORDER_V1.replace("Address", "string")
    src = RegistrySnapshot({"s": Subject("s", (v("s", 2, 5, ADDRESS), v("s", 7, 6, other)))})
    plan = plan_schemas(src, EMPTY, ["s"], "remap")
    assert registered(plan) == [("s", 1), ("s", 2)]


def destination_after(plan, source, id_of=lambda r: r.requested_id):
    """What the destination holds once `plan` ran (ids as requested, or 1000 + position in remap)."""
    subjects: dict[str, list[SchemaVersion]] = {}
    for i, r in enumerate(plan.registrations):
        schema_id = id_of(r) if id_of(r) is not None else 1000 + i
        subjects.setdefault(r.subject, []).append(
            SchemaVersion(r.subject, r.version, schema_id, " " + r.schema + "\n", r.schema_type, r.references))
    levels = {a.subject: a.level for a in plan.actions if isinstance(a, SetCompatibility) and a.subject}
    modes = {a.subject: a.mode for a in plan.actions if isinstance(a, SetMode) and a.mode != "IMPORT"}
    return RegistrySnapshot({s: Subject(s, tuple(vs), levels.get(s), modes.get(s)) for s, vs in subjects.items()},
                            compatibility=next((a.level for a in plan.actions
                                                if isinstance(a, SetCompatibility) and a.subject is None), None))


@pytest.mark.parametrize("mode", ["preserve", "remap"])
def test_a_rerun_after_a_complete_migration_plans_no_write(mode):
    source = source_registry()
    first = plan_schemas(source, EMPTY, ["orders-value"], mode)
    again = plan_schemas(source, destination_after(first, source), ["orders-value"], mode)
    assert again.actions == () and again.conflicts == ()
    assert set(again.id_map) == {11, 21, 22}


def test_same_subject_and_version_with_another_schema_is_a_conflict_and_nothing_is_planned():
    dst = RegistrySnapshot({"address": Subject("address", (v("address", 1, 11, ADDRESS.replace("city", "town")),))})
    plan = plan_schemas(source_registry(), dst, ["orders-value"], "preserve")
    assert plan.actions == ()
    (conflict,) = plan.conflicts
    assert (conflict.subject, conflict.version, conflict.source_id, conflict.destination_id) == ("address", 1, 11, 11)
    assert "'address' version 1" in str(conflict) and "source id 11" in str(conflict)


def test_preserve_refuses_an_id_the_destination_uses_for_another_schema():
    dst = RegistrySnapshot({}, schemas_by_id={21: ("AVRO", canonical('"string"'))})
    plan = plan_schemas(source_registry(), dst, ["orders-value"], "preserve")
    assert plan.actions == ()
    assert [(c.subject, c.version, c.source_id) for c in plan.conflicts] == [("orders-value", 1, 21)]


def test_preserve_accepts_an_id_the_destination_already_has_for_the_same_schema():
    dst = RegistrySnapshot({}, schemas_by_id={11: ("AVRO", canonical(ADDRESS))})
    assert not plan_schemas(source_registry(), dst, ["orders-value"], "preserve").conflicts


def test_reference_to_a_missing_version_and_cycles_are_refused():
    missing = RegistrySnapshot({"a": Subject("a", (v("a", 1, 1, ADDRESS, [Reference("X", "x", 1)]),))})
    with pytest.raises(SchemaPlanError, match="'x' version 1"):
        plan_schemas(missing, EMPTY, ["a"], "remap")
    cycle = RegistrySnapshot({
        "a": Subject("a", (v("a", 1, 1, ADDRESS, [Reference("B", "b", 1)]),)),
        "b": Subject("b", (v("b", 1, 2, ADDRESS, [Reference("A", "a", 1)]),)),
    })
    with pytest.raises(SchemaPlanError, match="cycle"):
        plan_schemas(cycle, EMPTY, ["a"], "remap")


def test_canonical_ignores_formatting_but_not_content():
    assert canonical('{"type": "string"}') == canonical('{\n  "type":"string"\n}')
    assert canonical(ADDRESS) != canonical(ADDRESS.replace("city", "town"))
    proto_a = 'syntax = "proto3";\n// c\nmessage A { int32 x = 1; }'
    proto_b = 'syntax = "proto3";\nmessage A {\n  int32 x = 1;\n}\n'
    assert canonical(proto_a, "PROTOBUF") == canonical(proto_b, "PROTOBUF")


@st.composite
def registries(draw):
    """Random subjects whose versions reference only versions of earlier subjects (a DAG)."""
    subjects: dict[str, Subject] = {}
    next_id = 1
    for s in range(draw(st.integers(1, 6))):
        name = f"s{s}"
        versions = []
        for n in range(1, draw(st.integers(1, 3)) + 1):
            refs = []
            if s and draw(st.booleans()):
                target = f"s{draw(st.integers(0, s - 1))}"
                ref_version = draw(st.sampled_from([x.version for x in subjects[target].versions]))
                refs.append(Reference(f"R{target}", target, ref_version))
            versions.append(v(name, n, next_id, f'{{"type":"string","x":"{name}.{n}"}}', refs))
            next_id += 1
        subjects[name] = Subject(name, tuple(versions))
    return RegistrySnapshot(subjects)


@settings(max_examples=60, deadline=None)
@given(source=registries(), mode=st.sampled_from(["preserve", "remap"]), data=st.data())
def test_every_version_comes_after_what_it_needs_and_a_rerun_is_empty(source, mode, data):
    chosen = data.draw(st.sets(st.sampled_from(sorted(source.subjects)), min_size=1))
    plan = plan_schemas(source, EMPTY, chosen, mode)
    position = {(r.subject, r.version): i for i, r in enumerate(plan.registrations)}
    for r in plan.registrations:
        for ref in r.references:
            assert position[(ref.subject, ref.version)] < position[(r.subject, r.version)]
        if r.version > 1:
            assert position[(r.subject, r.version - 1)] < position[(r.subject, r.version)]
    assert plan_schemas(source, destination_after(plan, source), chosen, mode).actions == ()


PING_DESCRIPTOR = "ChBwcm9iZS9waW5nLnByb3RvEgRhY21lIiEKBFBpbmcSCwoDc2VxGAEgASgFEgwKBGZyb20YAiABKAliBnByb3RvMw=="
PING_TEXT = 'syntax = "proto3";\npackage acme;\n\nmessage Ping {\n  int32 seq = 1;\n  string from = 2;\n}\n'


def test_a_serialized_protobuf_descriptor_is_registered_as_proto_text_and_then_found_equal():
    """What confluent-kafka's serializer registers (a base64 descriptor) goes to the destination as .proto text, and
    the stored text counts as the same schema on the next run (invariant B across the two forms)."""
    source = RegistrySnapshot({"pings-value": Subject("pings-value", (
        v("pings-value", 1, 31, PING_DESCRIPTOR, schema_type="PROTOBUF"),))})
    plan = plan_schemas(source, EMPTY, ["pings-value"], "preserve")
    (register,) = plan.registrations
    assert register.schema == ('syntax = "proto3";\npackage acme;\nmessage Ping {\n  int32 seq = 1;\n'
                               '  string from = 2;\n}\n')
    assert canonical(PING_DESCRIPTOR, "PROTOBUF") == canonical(PING_TEXT, "PROTOBUF")
    done = RegistrySnapshot({"pings-value": Subject("pings-value", (
        v("pings-value", 1, 31, PING_TEXT, schema_type="PROTOBUF"),))})
    again = plan_schemas(source, done, ["pings-value"], "preserve")
    assert (again.registrations, again.conflicts) == ((), ())


def test_a_descriptor_that_cannot_be_written_as_text_is_refused_naming_subject_version_and_id():
    import base64

    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FileDescriptorProto(name="old.proto", package="old")
    fdp.message_type.add(name="Ext").extension_range.add(start=100, end=200)
    source = RegistrySnapshot({"old-value": Subject("old-value", (
        v("old-value", 4, 41, base64.b64encode(fdp.SerializeToString()).decode(), schema_type="PROTOBUF"),))})
    with pytest.raises(SchemaPlanError, match=r"subject 'old-value' version 4 \(id 41\) is stored as a serialized "
                                              r"Protobuf descriptor .*\(message Ext: extensions\)"):
        plan_schemas(source, EMPTY, ["old-value"], "remap")


def test_the_same_protobuf_schema_in_two_forms_cannot_be_preserved_and_remaps_to_one():
    """A subject with .proto text v1 and the serializer's descriptor of the same schema as v2 (Apicurio keeps both):
    a destination keeps one version of it, so preserve refuses up front; remap registers both (the second answers
    the first's id), and the copy maps both source ids to it."""
    source = RegistrySnapshot({"pings-value": Subject("pings-value", (
        v("pings-value", 1, 31, PING_TEXT, schema_type="PROTOBUF"),
        v("pings-value", 2, 32, PING_DESCRIPTOR, schema_type="PROTOBUF")))})
    refused = plan_schemas(source, EMPTY, ["pings-value"], "preserve")
    assert refused.registrations == ()
    assert [str(c) for c in refused.conflicts] == [
        "subject 'pings-value' version 2: source id 32, destination id None: the same schema as version 1 (id 31) "
        "in another form: a registry keeps it once, so preserve cannot keep both ids; use remap mode (both ids map "
        "to one)"]
    remapped = plan_schemas(source, EMPTY, ["pings-value"], "remap")
    assert [(r.version, r.source_id) for r in remapped.registrations] == [(1, 31), (2, 32)]
