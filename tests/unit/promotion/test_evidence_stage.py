"""promotion.evidence on the in-memory clusters of ``tests/fakes`` and a local work dir: a promotion's bundle written
(signed, the key recorded once), read back and verified, and the clusters re-read per partition and group: records
appended later are ``later``, a changed record a ``mismatch``, a group moved back a ``mismatch``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore
from test_reconcile_copies import RECORDS, TS, clusters, copy_of

from kafka_ferry.core.cutover.evidence import LATER, MANIFEST, MATCHES, MISMATCH, SIGNATURE, EvidenceError, fingerprint
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.promotion.evidence import bundle_dir, promotion_files, run_bundles, verify, write_bundle
from kafka_ferry.promotion.reconcile import reconcile_copies
from kafka_ferry.state.evidence_key import recorded_key

# without its registry: the source's records are read as they are (no schema id map to apply)
SPEC = load_spec(Path(__file__).resolve().parents[3] / "dags" / "migrations" / "demo-tenant.yaml").model_copy(
    update={"schema_registry": None})
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


def promoted(tmp_path):
    source, destination = clusters()
    reconciliation = reconcile_copies(source, destination, [copy_of(source, destination)]).as_dict()
    destination.alter_group_offsets("g", {("t.dst", 0): 3})
    report = {"migration": SPEC.name, "status": "promoted", "reconciliation": reconciliation,
              "groups": [{"group": "g", "source_topic": "t", "partition": 0, "destination_topic": "t.dst",
                          "upstream_offset": 3, "downstream_offset": 3, "method": "exact-sync"}],
              "steps": {"mark_promoted": {"summary": {"fences_lifted": 2}}}, "decode_totals": {},
              "report_path": "/elsewhere"}
    store = FakeStateStore(destination).created()
    act = {"action": "promote", "user": "alice", "confirmation": SPEC.name, "run_id": "manual__1"}
    files = promotion_files(report, store, act, {"authority": {"user": "alice"}}, source, destination)
    evidence = write_bundle(SPEC, store, tmp_path / "work", "promote", "manual__1", files, KEY)
    return source, destination, store, evidence


def test_a_promotions_bundle_is_written_signed_and_verifies(tmp_path):
    source, destination, store, evidence = promoted(tmp_path)
    folder = bundle_dir(tmp_path / "work", "promote", "manual__1")
    assert evidence["path"] == str(folder) and evidence["status"] == "verified" and evidence["signed"]
    assert {p.name for p in folder.iterdir()} == {
        MANIFEST, SIGNATURE, "act.json", "acls-and-fences.json", "groups.json", "preflight.json",
        "reconciliation.json", "report.json", "schema-ids.json", "tasks.json", "versions.json"}
    assert json.loads((folder / "acls-and-fences.json").read_text())["fences_lifted"] == 2
    assert "report_path" not in json.loads((folder / "report.json").read_text())
    assert json.loads((folder / "act.json").read_text())["user"] == "alice"
    key = recorded_key(store)
    assert key is not None and fingerprint(key) == evidence["fingerprint"]
    assert run_bundles(tmp_path / "work", "manual__1") == [folder]

    verdict = verify(folder, source=source, destination=destination, spec=SPEC, store=store)
    assert verdict.ok, verdict.lines()
    assert {r["name"]: r["verdict"] for r in verdict.checks["partitions"]} == {
        "t-0 (source)": MATCHES, "t.dst-0 (destination)": MATCHES}
    assert [r["verdict"] for r in verdict.checks["groups"]] == [MATCHES]


def test_records_appended_later_are_later_and_a_changed_record_or_a_group_moved_back_a_mismatch(tmp_path):
    source, destination, store, evidence = promoted(tmp_path)
    folder = Path(evidence["path"])
    destination.produce("t.dst", 0, (b"k9", b"new", None), timestamp_ms=TS)
    destination.alter_group_offsets("g", {("t.dst", 0): 6})
    verdict = verify(folder, source=source, destination=destination, spec=SPEC, store=store)
    assert verdict.ok  # later is not a mismatch
    assert {r["name"]: r["verdict"] for r in verdict.checks["partitions"]}["t.dst-0 (destination)"] == LATER
    assert [r["verdict"] for r in verdict.checks["groups"]] == [LATER]

    source.topics["t"].partitions[0].records[1] = (b"k1", b"changed", TS, RECORDS[1][2])
    destination.alter_group_offsets("g", {("t.dst", 0): 1})
    verdict = verify(folder, source=source, destination=destination, spec=SPEC, store=store)
    assert not verdict.ok and verdict.intact
    assert {r["name"]: r["verdict"] for r in verdict.checks["partitions"]}["t-0 (source)"] == MISMATCH
    assert [r["verdict"] for r in verdict.checks["groups"]] == [MISMATCH]
    assert "NOT verified" in verdict.lines()[-1]


def test_another_key_is_refused_naming_both_fingerprints_and_writes_nothing(tmp_path):
    _, _, store, evidence = promoted(tmp_path)
    other = Ed25519PrivateKey.from_private_bytes(bytes(32))
    with pytest.raises(EvidenceError, match=f"fingerprint .* the state topic recorded {evidence['fingerprint']}"):
        write_bundle(SPEC, store, tmp_path / "work", "rollback", "manual__2", {"a.json": b"{}"}, other)
    assert not bundle_dir(tmp_path / "work", "rollback", "manual__2").exists()


def test_a_required_signature_without_a_key_writes_nothing(tmp_path):
    spec = SPEC.model_copy(update={"evidence": SPEC.evidence.model_copy(
        update={"signing_connection_id": "k", "require_signature": True})})
    store = FakeStateStore(FakeCluster("destination")).created()
    with pytest.raises(EvidenceError, match="require_signature"):
        write_bundle(spec, store, tmp_path / "work", "promote", "r", {"a.json": b"{}"}, None)
    assert not (tmp_path / "work").exists()


def test_a_staged_group_steps_bundle_holds_its_groups_translation_from_the_state_topic(tmp_path):
    from kafka_ferry.core.common.state_records import GROUP_PROMOTION_KIND
    from kafka_ferry.promotion.evidence import staged_files

    source, destination = clusters()
    store = FakeStateStore(destination).created()
    decision = {"group": "g", "source_topic": "t", "partition": 0, "destination_topic": "t.dst",
                "upstream_offset": 3, "downstream_offset": 3, "method": "exact-sync"}
    store.put(GROUP_PROMOTION_KIND, "g", {"name": "g", "run_id": "manual__2", "steps_done": ["translated", "promoted"],
                                          "started_at_ms": 1, "detail": {"translated": {"decisions": [decision]}}})
    files = staged_files({"action": "promote-groups", "this_run": ["g"]}, store, {"action": "promote-groups"}, None,
                         source, destination)
    assert json.loads(files["groups.json"]) == [
        {"group": "g", "side": "destination", "topic": "t.dst", "partition": 0, "offset": 3, "method": "exact-sync",
         "source_topic": "t", "source_offset": 3}]
    assert json.loads(files["tasks.json"]) == {"steps": {"g": ["translated", "promoted"]}}
    evidence = write_bundle(SPEC, store, tmp_path / "work", "promote-groups", "manual__2", files, None)
    assert evidence["status"] == "verified" and not evidence["signed"]
    assert not (Path(evidence["path"]) / SIGNATURE).exists()


def test_the_command_verifies_a_local_bundle_and_names_a_changed_file(tmp_path, capsys):
    from kafka_ferry.cli import main

    _, _, _, evidence = promoted(tmp_path)
    assert main(["verify-evidence", evidence["path"], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["signature"] == "valid" and {f["verdict"] for f in out["files"]} == {"ok"}
    groups = Path(evidence["path"]) / "groups.json"
    groups.write_bytes(groups.read_bytes().replace(b'"offset":3', b'"offset":4'))
    assert main(["verify-evidence", evidence["path"]]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "  FAILED groups.json: changed" in [line.split(" (")[0] for line in lines] and lines[-1] == "  NOT verified"
    assert main(["verify-evidence", str(tmp_path / "nowhere")]) == 1
    assert "no evidence bundle folder there" in capsys.readouterr().err


def test_the_acl_migrations_record_is_in_the_bundle_and_a_bundle_without_it_still_verifies(tmp_path):
    """``acls-and-fences.json`` carries ``acl_migration`` (created / present / refused, from the state topic); the
    field is content, not manifest layout (version 1 unchanged), so a bundle written before it verifies as before."""
    from kafka_ferry.core.acls.acl_migration import Refusal
    from kafka_ferry.core.acls.acl_plan import AclEntry
    from kafka_ferry.core.acls.acl_record import entry_row, run_record
    from kafka_ferry.core.common.state_records import ACL_MIGRATION_KIND

    source, destination = clusters()
    store = FakeStateStore(destination).created()
    created = AclEntry("User:app", "TOPIC", "t.dst", "READ")
    refused = Refusal(AclEntry("User:merged", "TOPIC", "t.dst", "WRITE"), "User:b may not write t")
    store.put(ACL_MIGRATION_KIND, "manual__0", run_record("manual__0", [created], 2, [refused], 5, {}) or {})
    files = promotion_files({"steps": {}}, store, None, None, source, destination)
    acls = json.loads(files["acls-and-fences.json"])["acl_migration"]
    assert acls["created"] == [{**entry_row(created), "run_id": "manual__0"}]
    assert acls["present"] == 2
    assert acls["refused"] == [{"entry": entry_row(refused.entry), "reason": "User:b may not write t"}]
    assert [r["run_id"] for r in acls["runs"]] == ["manual__0"]
    from kafka_ferry.cli import main

    old = {**files, "acls-and-fences.json": b'{"fences_lifted":0,"fences_recorded":{}}'}  # as version 1 began
    for where, bundle in (("new", files), ("old", old)):  # `kafka-ferry verify-evidence` on each
        folder = write_bundle(SPEC, store, tmp_path / where, "promote", "r1", bundle, KEY)["path"]
        assert main(["verify-evidence", folder, "--require-signature"]) == 0
        (Path(folder) / "acls-and-fences.json").write_bytes(b'{"acl_migration":{}}')  # and a changed byte fails
        assert main(["verify-evidence", folder]) == 1
