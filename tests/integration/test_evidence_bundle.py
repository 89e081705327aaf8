"""The evidence bundle (issue 42) through the routes a user takes: a promotion and a rollback of a real migration DAG
(``dag.test(run_conf=...)`` as the form sends them), its work dir on the test bed's S3-compatible server, the
signing key from an Airflow connection of type ``evidencesigning``; then ``kafka-ferry verify-evidence`` on the
object store URL and on a local copy, and every kind of file changed by one byte, or the manifest swapped, fails
naming the file.

One state, built once and shared with the work dir's object-store route (moved here from test_work_dir_object_store.py
so CI builds one catch-up and one promotion, not two): two catch-up runs (60 records, then 10 more), promote, records
produced on the destination after the cutover, rollback; what the object-store test asserts of the work dir after each
of the first three runs is kept as it was then (the later runs change the overview), and the API server renders the
first run's page and the Migrations page from the bucket with no shared volume.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import uuid

import pytest
from route_support import Workspace, form_conf, states
from scenarios import commit_source_group, seed_plain, write_spec

from kafka_ferry.core.cutover.evidence import (
    LATER,
    MANIFEST,
    MATCHES,
    SIGNATURE,
    decode_manifest,
    fingerprint,
    load_private_key,
    sign,
)
from kafka_ferry.core.cutover.evidence import public_bytes as public_of
from kafka_ferry.promotion.evidence import verify, write_bundle
from kafka_ferry.reports.publish import run_file_name
from kafka_ferry.state.evidence_key import recorded_key
from kafka_ferry.state.store import MigrationStateStore

# catch-up, promotion and rollback through the DAG with Spark: the module fixture is in the first test's time
pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark, pytest.mark.long,
              pytest.mark.timeout(2400)]

SIGNING_CONN = "kf_test_evidence"
SEED = bytes(range(1, 33))
WORK_DIR_CONN = "kf_test_evidence_s3"
# every kind of file a promotion's bundle holds
PROMOTION_FILES = {"act.json", "acls-and-fences.json", "groups.json", "offset-map.json", "preflight.json",
                   "reconciliation.json", "report.json", "schema-ids.json", "tasks.json", "versions.json"}


# The API server's side: Airflow's real app, a logged-in user, the plugin's two pages.
PROBE = textwrap.dedent("""
    import json, sys
    from fastapi.testclient import TestClient
    from airflow.api_fastapi.app import create_app

    client = TestClient(create_app())
    token = client.post("/auth/token", json={"username": "viewer", "password": "s3cret"}).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    run = client.get(f"/kafka-ferry/runs/{sys.argv[1]}/{sys.argv[2]}", headers=auth)
    overview = client.get("/kafka-ferry/", headers=auth)
    print("RESULT " + json.dumps({"run": [run.status_code, run.text],
                                  "overview": [overview.status_code, overview.text]}))
""")


def _run(env: dict, *args: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", *args], env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, (done.stdout + done.stderr)[-5000:]
    return json.loads(lines[0][7:]), done.stdout + done.stderr


def _last_run(ws: Workspace, result: dict) -> dict:
    """``result`` with the run id and the XCom values of the workspace's latest run, read from its Airflow DB."""
    with sqlite3.connect(ws.env["AIRFLOW_HOME"] + "/airflow.db") as db:
        (run_id,) = db.execute("SELECT run_id FROM dag_run ORDER BY id DESC LIMIT 1").fetchone()
        xcoms = [str(v) for (v,) in db.execute("SELECT value FROM xcom WHERE run_id = ?", (run_id,))]
    return {**result, "run_id": run_id, "xcoms": xcoms}


@pytest.fixture(scope="module")
def bundles(clusters, object_store, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("evidence")
    import s3fs

    root = f"{object_store.BUCKET}/{uuid.uuid4().hex[:12]}"
    fs = s3fs.S3FileSystem(key=object_store.ACCESS_KEY, secret=object_store.SECRET_KEY,
                           endpoint_url=object_store.ENDPOINT, skip_instance_cache=True, use_listings_cache=False)
    if not fs.exists(object_store.BUCKET):
        fs.mkdir(object_store.BUCKET)
    p = clusters.unique("evid")
    topic = clusters.create_topic("source", f"{p}.t", 2)
    seed_plain(clusters, topic, 2, 30)
    group = f"{p}-g"
    commit_source_group(clusters, group, {(topic, 0): 10, (topic, 1): 25})
    spec_path = write_spec(tmp, clusters, p, promotion={"quiesce_window_seconds": 1, "poke_interval_seconds": 1},
                           evidence={"signing_connection_id": SIGNING_CONN, "require_signature": True})
    ws = Workspace(tmp, spec_path)
    s3_env = {"KFERRY_WORK_DIR": f"s3://{root}/work", "KFERRY_WORK_DIR_CONN_ID": WORK_DIR_CONN,
              f"AIRFLOW_CONN_{WORK_DIR_CONN.upper()}": json.dumps(
                  {"conn_type": "aws", "login": object_store.ACCESS_KEY, "password": object_store.SECRET_KEY,
                   "extra": {"endpoint_url": object_store.ENDPOINT, "region_name": "us-east-1"}})}
    ws.env.update({
        **s3_env, "KFERRY_LOCAL_DIR": str(tmp / "local"),
        f"AIRFLOW_CONN_{SIGNING_CONN.upper()}": json.dumps(
            {"conn_type": "evidencesigning", "password": base64.b64encode(SEED).decode()})})
    name = ws.spec.name
    work = f"{root}/work/{name}"
    try:
        # the work dir after each run, as the object-store test reads it then (the later runs change the overview)
        first = _last_run(ws, ws.dag_test(form_conf("catch-up")))
        assert first["state"] == "success", first["log"][-6000:]
        after_first = {"names": {f.removeprefix(work + "/") for f in fs.find(work)},
                       "local_json": [str(f) for f in (tmp / "local").rglob("*.json")]}
        after_first["offset_map"] = json.loads(fs.cat(f"{work}/offset-map/offset-map.json"))
        seed_plain(clusters, topic, 2, 5, start=30)
        second = _last_run(ws, ws.dag_test(form_conf("catch-up")))
        assert second["state"] == "success", second["log"][-6000:]
        after_second = {"paths": fs.find(work),
                        "overview": json.loads(fs.cat(f"{work}/overview.json"))}
        promoted = _last_run(ws, ws.dag_test(form_conf("promote", name)))
        assert promoted["state"] == "success", promoted["log"][-6000:]
        after_promotion = {"promotion": json.loads(fs.cat(f"{work}/promotion-report.json")),
                           "overview": json.loads(fs.cat(f"{work}/overview.json"))}
        store = MigrationStateStore(clusters.cluster("destination"), ws.spec.state_topic_name)
        key_after_promotion = recorded_key(store)
        producer = clusters.producer("destination")
        for q in range(2):  # after the cutover, producers write on the destination: the rollback copies these back
            for i in range(4):
                producer.produce(topic, key=b"after", value=f"after-{q}-{i}".encode(), partition=q)
        assert producer.flush(30) == 0
        rolled = ws.dag_test(form_conf("rollback", name))
        assert rolled["state"] == "success" and states(rolled)["rollback"] == "success", rolled["log"][-6000:]
        prefix = f"{root}/work/{name}/evidence"
        folders = sorted(f.rsplit("/", 1)[-1] for f in fs.ls(prefix))
        yield {"ws": ws, "fs": fs, "root": root, "prefix": prefix, "folders": folders, "tmp": tmp, "store": store,
               "topic": topic, "group": group, "promoted": promoted, "rolled": rolled, "name": name,
               "key_after_promotion": key_after_promotion, "s3_env": s3_env, "work": work, "first": first,
               "second": second, "after_first": after_first, "after_second": after_second,
               "after_promotion": after_promotion}
    finally:
        fs.rm(root, recursive=True) if fs.exists(root) else None


def _cli_verify(b, url: str, *extra: str):
    done = b["ws"].cli("verify-evidence", url, *extra)
    return done.returncode, done.stdout + done.stderr


def _local_copy(b, folder: str, name: str):
    target = b["tmp"] / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    for remote in b["fs"].ls(f"{b['prefix']}/{folder}"):
        (target / remote.rsplit("/", 1)[-1]).write_bytes(b["fs"].cat(remote))
    return target


def test_a_promotion_and_a_rollback_each_write_a_signed_bundle_on_the_object_store(bundles):
    b = bundles
    assert [f.split("-", 1)[0] for f in b["folders"]] == ["promote", "rollback"], b["folders"]
    promote = {n.rsplit("/", 1)[-1] for n in b["fs"].ls(f"{b['prefix']}/{b['folders'][0]}")}
    assert promote == PROMOTION_FILES | {MANIFEST, SIGNATURE}
    manifest = decode_manifest(b["fs"].cat(f"{b['prefix']}/{b['folders'][0]}/{MANIFEST}"))
    assert manifest.action == "promote" and manifest.run_id.startswith("manual__")
    assert set(manifest.files) == PROMOTION_FILES and manifest.public_key == public_of(load_private_key(
        SEED.hex(), "test"))
    # the public key is recorded in the state topic at the first promotion; the private key is nowhere in the work dir
    assert b["key_after_promotion"] == manifest.public_key
    for path in b["fs"].find(b["root"]):
        data = b["fs"].cat(path)
        assert SEED not in data and base64.b64encode(SEED) not in data
    act = json.loads(b["fs"].cat(f"{b['prefix']}/{b['folders'][0]}/act.json"))
    assert act["action"] == "promote" and act["confirmation"] == b["name"] and act["status"] == "done"
    assert act["run_id"] == manifest.run_id
    groups = json.loads(b["fs"].cat(f"{b['prefix']}/{b['folders'][0]}/groups.json"))
    assert {(g["group"], g["partition"]) for g in groups} == {(b["group"], 0), (b["group"], 1)}
    assert all(g["method"] and g["side"] == "destination" for g in groups)
    reconciliation = json.loads(b["fs"].cat(f"{b['prefix']}/{b['folders'][0]}/reconciliation.json"))
    assert reconciliation["ok"] and len(reconciliation["partitions"]) == 2
    versions = json.loads(b["fs"].cat(f"{b['prefix']}/{b['folders'][0]}/versions.json"))
    assert versions["source"]["cluster_id"] and versions["destination"]["cluster_id"] and versions["kafka_ferry"]
    # the run page links the bundle and says it verified
    page = b["fs"].cat(f"{b['root']}/work/{b['name']}/runs/{run_file_name(manifest.run_id)}.html").decode()
    assert "Evidence bundle" in page and "verify the bundle now" in page and "verified" in page


def test_verify_evidence_on_the_object_store_passes_and_re_reads_both_clusters(bundles):
    b = bundles
    url = f"s3://{b['prefix']}/{b['folders'][0]}"
    code, out = _cli_verify(b, url, "--spec", str(b["ws"].spec_path), "--json")
    assert code == 0, out[-4000:]
    result = json.loads(out[out.index("{"):])
    assert result["ok"] and result["signature"] == "valid"
    verdicts = {row["name"]: row["verdict"] for row in result["checks"]["partitions"]}
    # the rollback copied the records produced on the destination after the cutover back to the source: both sides
    # of the promotion's reconciliation now have records appended after it, which is "later", not a mismatch
    assert verdicts == {f"{b['topic']}-{q} ({side})": LATER for q in range(2) for side in ("source", "destination")}
    groups = {row["name"]: row["verdict"] for row in result["checks"]["groups"]}
    assert set(groups.values()) <= {MATCHES, LATER} and len(groups) == 2, result["checks"]["groups"]

    rollback_url = f"s3://{b['prefix']}/{b['folders'][1]}"
    code, out = _cli_verify(b, rollback_url, "--spec", str(b["ws"].spec_path))
    assert code == 0 and "verified" in out.splitlines()[-1], out[-4000:]
    assert f"group {b['group']} {b['topic']}-0 (source): matches" in out, out


def test_one_changed_byte_of_any_file_or_a_swapped_manifest_fails_naming_the_file(bundles):
    b = bundles
    promotion = _local_copy(b, b["folders"][0], "promotion")
    rollback = _local_copy(b, b["folders"][1], "rollback")
    assert verify(promotion).ok and verify(rollback).ok
    code, out = _cli_verify(b, str(promotion))
    assert code == 0 and out.splitlines()[-1].strip() == "verified", out

    for name in sorted(PROMOTION_FILES | {SIGNATURE}):
        tampered = _local_copy(b, b["folders"][0], f"tampered-{name}")
        data = bytearray((tampered / name).read_bytes())
        data[len(data) // 2] ^= 0x01
        (tampered / name).write_bytes(bytes(data))
        verdict = verify(tampered)
        assert not verdict.ok, name
        if name == SIGNATURE:
            assert verdict.signature.startswith("invalid: manifest.sig does not hold"), verdict.signature
        else:
            assert [(f.path, f.verdict) for f in verdict.failed_files] == [(name, "changed")], verdict.lines()
    code, out = _cli_verify(b, str(b["tmp"] / "tampered-reconciliation.json"))
    assert code == 1 and "FAILED reconciliation.json: changed" in out and "NOT verified" in out, out

    swapped = _local_copy(b, b["folders"][0], "swapped")
    shutil.copy(rollback / MANIFEST, swapped / MANIFEST)
    shutil.copy(rollback / SIGNATURE, swapped / SIGNATURE)
    verdict = verify(swapped)
    assert not verdict.ok and {f.path for f in verdict.failed_files} >= {"report.json", "act.json"}, verdict.lines()
    swapped_manifest_only = _local_copy(b, b["folders"][0], "swapped-manifest-only")
    shutil.copy(rollback / MANIFEST, swapped_manifest_only / MANIFEST)
    assert verify(swapped_manifest_only).signature.startswith("invalid: manifest.sig does not hold")


def test_a_changed_byte_on_the_object_store_fails_the_same(bundles):
    b = bundles
    path = f"{b['prefix']}/{b['folders'][1]}/groups.json"
    original = b["fs"].cat(path)
    b["fs"].pipe(path, original[:-1] + bytes([original[-1] ^ 0x01]))
    try:
        code, out = _cli_verify(b, f"s3://{b['prefix']}/{b['folders'][1]}")
        assert code == 1 and "FAILED groups.json: changed" in out, out
    finally:
        b["fs"].pipe(path, original)


def test_a_bundle_signed_by_another_key_is_refused_naming_both_fingerprints(bundles, clusters):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    b = bundles
    other = Ed25519PrivateKey.from_private_bytes(bytes(32))
    recorded = fingerprint(b["key_after_promotion"])
    # the stage refuses to write one (nothing written)
    with pytest.raises(Exception, match=f"{fingerprint(public_of(other))}.*{recorded}"):
        write_bundle(b["ws"].spec, b["store"], b["tmp"] / "other", "promote", "x", {"a.json": b"{}"}, other)
    assert not (b["tmp"] / "other").exists()
    # a bundle re-signed with another key passes alone, and is refused against the state topic's key
    resigned = _local_copy(b, b["folders"][0], "resigned")
    manifest = decode_manifest((resigned / MANIFEST).read_bytes())
    data = type(manifest)(**{**manifest.__dict__, "public_key": public_of(other)}).encode()
    (resigned / MANIFEST).write_bytes(data)
    (resigned / SIGNATURE).write_bytes(sign(other, data))
    assert verify(resigned).ok
    refused = verify(resigned, store=b["store"])
    assert not refused.ok and fingerprint(public_of(other)) in refused.signature and recorded in refused.signature


def test_catch_up_and_promotion_keep_the_work_dir_on_s3_and_the_ui_renders_it(bundles, object_store):
    # moved from test_work_dir_object_store.py: asserted on the module's state, each at the moment it held
    b = bundles
    ws, fs, s3_env, p, prefix, topic = b["ws"], b["fs"], b["s3_env"], b["name"], b["work"], b["topic"]
    first, second, promoted = b["first"], b["second"], b["promoted"]
    first_log, second_log, promoted_log = first["log"], second["log"], promoted["log"]
    dags, home, dag_id = ws.dags, ws.env["AIRFLOW_HOME"], ws.spec.dag_id

    assert first["state"] == "success", first_log[-5000:]
    assert first["tasks"]["copy_batch"][0] == "success"
    names = b["after_first"]["names"]
    plans = sorted(n for n in names if n.startswith("plan-"))
    assert len(plans) == 1 and plans[0].replace("plan-", "report-") in names, names
    assert {"overview.json", "offset-map/offset-map.json", "offset-map/offset-map.csv",
            f"runs/{run_file_name(first['run_id'])}.html"} <= names, names
    report = json.loads(fs.cat(f"{prefix}/{plans[0].replace('plan-', 'report-')}"))
    assert report["records_copied"] == 60
    offset_map = b["after_first"]["offset_map"]
    assert {(q["source_topic"], q["partition"]) for q in offset_map["partitions"]} == {(topic, 0), (topic, 1)}
    # nothing of the work dir on this host: the default local work dir was never made, only the local staging
    assert not os.path.exists(f"{home}/kafka-ferry")
    assert not b["after_first"]["local_json"]  # the staged plan and report went back to the store

    assert second["state"] == "success", second_log[-5000:]
    (second_report,) = {n.removeprefix(prefix + "/") for n in b["after_second"]["paths"]
                        if n.endswith(".json") and "/report-" in n} - {plans[0].replace("plan-", "report-")}
    report2 = json.loads(fs.cat(f"{prefix}/{second_report}"))
    assert report2["records_copied"] == 10  # the copy job read the second plan from the store, wrote its report there
    overview = b["after_second"]["overview"]
    assert (overview["dag_id"], overview["last_run_id"], overview["lag"]) == (dag_id, second["run_id"], 0)

    assert promoted["state"] == "success", promoted_log[-5000:]
    promotion = b["after_promotion"]["promotion"]
    assert promotion["status"] == "promoted" and promotion["reconciliation"]["ok"]
    overview = b["after_promotion"]["overview"]
    # the promotion read the row the catch-up runs wrote and kept it (last batch), marking it promoted
    assert overview["promoted"] is True and overview["last_run_id"] == promoted["run_id"]
    assert overview["last_batch"] == report2["batch_id"]
    for text in (first_log, second_log, promoted_log, *first["xcoms"], *second["xcoms"], *promoted["xcoms"]):
        assert object_store.SECRET_KEY not in text

    # the API server: the same settings and connection, no volume shared with the "workers" above
    ui_home = b["tmp"] / "api-server"
    (ui_home / "plugins").mkdir(parents=True)
    (ui_home / "passwords.json").write_text(json.dumps({"viewer": "s3cret"}))
    ui_env = {**os.environ, **s3_env, "AIRFLOW_HOME": str(ui_home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
              "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__PLUGINS_FOLDER": str(ui_home / "plugins"),
              "AIRFLOW__CORE__AUTH_MANAGER":
                  "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
              "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "viewer:admin",
              "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(ui_home / "passwords.json"),
              "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db"}
    ui_env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    ui_env.pop("KFERRY_LOCAL_DIR", None)
    pages, ui_log = _run(ui_env, PROBE, dag_id, first["run_id"])

    assert pages["run"][0] == 200, ui_log[-3000:]
    assert "<b>60</b>records copied" in pages["run"][1]
    assert pages["overview"][0] == 200 and p in pages["overview"][1] and "no migration has reported" not in \
        pages["overview"][1]
    assert not (ui_home / "kafka-ferry").exists()
