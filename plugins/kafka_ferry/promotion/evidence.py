"""The evidence bundle's I/O: gathers what a cutover already produced into ``<work dir>/evidence/<action>-<run>/``,
writes it with its manifest (signed when the spec names a key), and reads a bundle back to verify it against its
manifest and against both clusters as they are now. The format and the verdicts are ``core.cutover.evidence``.

What a bundle holds (each a canonical JSON file, listed with its SHA-256 in ``manifest.json``):

- ``report.json``: the run's report (the promotion report, or the rollback's: steps, groups, reconciliation);
- ``reconciliation.json``: per partition the ranges, counts and digests on both sides;
- ``groups.json``: every group's committed offset the cutover set, per partition, with the translation's method;
- ``offset-map.json``: the offset map the final translation wrote (a promotion);
- ``schema-ids.json``: the schema id map (remap mode) and the decode check's totals;
- ``acls-and-fences.json``: the fences recorded and lifted, and what the ACL migration did (``acl_migration``: the
  entries it created on the destination, with their run; the count it found present and its refusals, as its newest
  record says; every record; ``core.acls.acl_record.bundle_view``);
- ``preflight.json``: the run's pre-flight (its plan diff and checks);
- ``tasks.json``: the run's steps as recorded (finished when, how long, their summaries);
- ``act.json``: who triggered it, why they may, the typed confirmation, the run;
- ``versions.json``: kafka-ferry's version and both clusters' ids and broker counts.

Why folder files and not one archive: a file of the bundle is read, shown and checked alone (a changed byte names
its file), and the work dir's object store writes each whole; ``manifest.json`` is written last, so a reader that
finds it finds every file it lists.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from kafka_ferry import __version__
from kafka_ferry.core.acls.acl_record import bundle_view
from kafka_ferry.core.common.state_records import (
    ACL_MIGRATION_KIND,
    FENCE_KIND,
    GROUP_PROMOTION_KIND,
    SCHEMA_ID_KIND,
    TOPIC_PROMOTION_KIND,
)
from kafka_ferry.core.cutover.evidence import (
    LATER,
    MANIFEST,
    MATCHES,
    SIGNATURE,
    UNREACHABLE,
    UNREADABLE,
    BundleVerdict,
    EvidenceError,
    canonical,
    group_expectations,
    group_verdict,
    manifest_of,
    partition_verdict,
    public_bytes,
    sign,
    signer_problem,
    verify_bundle,
    with_checks,
)
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.promotion.reconcile import range_digests
from kafka_ferry.reports.publish import run_file_name
from kafka_ferry.state.evidence_key import record_key, recorded_key
from kafka_ferry.state.protocol import StateStore
from kafka_ferry.storage.workdir import StoragePath, as_path, is_local, write_bytes

log = logging.getLogger(__name__)

EVIDENCE_DIR = "evidence"

__all__ = ["LATER", "MATCHES", "BundleVerdict", "bundle_dir", "promotion_files", "read_bundle", "rollback_files",
           "run_bundles", "staged_files", "verify", "write_bundle"]


def bundle_dir(work_dir: str | StoragePath, action: str, run_id: str) -> StoragePath:
    """``<work dir>/evidence/<action>-<run id>``, the run id escaped as its run page's name is (one-to-one)."""
    return as_path(work_dir) / EVIDENCE_DIR / f"{action}-{run_file_name(run_id)}"


def run_bundles(migration_dir: StoragePath, run_id: str) -> list[StoragePath]:
    """The bundles of one run (a run is one act: one bundle; listed, not guessed from the action)."""
    folder = migration_dir / EVIDENCE_DIR
    suffix = "-" + run_file_name(run_id)
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if p.name.endswith(suffix) and p.is_dir()), key=lambda p: p.name)


def versions(source: Cluster, destination: Cluster) -> dict[str, Any]:
    """kafka-ferry's version and each cluster's id and broker count (a cluster not answering says why)."""
    out: dict[str, Any] = {"kafka_ferry": __version__}
    for role, cluster in (("source", source), ("destination", destination)):
        try:
            info = cluster.describe_cluster()
            out[role] = {"cluster_id": info.cluster_id, "brokers": info.broker_count,
                         "bootstrap_servers": getattr(cluster, "bootstrap_servers", None)}
        except Exception as exc:  # noqa: BLE001 - recorded as unreadable: the cutover is done already
            out[role] = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        import confluent_kafka

        out["client"] = {"confluent_kafka": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0]}
    except ImportError:  # pragma: no cover - the clients floor always has it
        pass
    return out


def _common(store: StateStore, act: Mapping[str, Any] | None, preflight: Mapping[str, Any] | None,
            source: Cluster, destination: Cluster, tasks: Any) -> dict[str, Any]:
    state = store.read_all()
    return {"act.json": dict(act or {}), "preflight.json": dict(preflight or {}), "tasks.json": tasks,
            "schema-ids.json": {"schema_ids": SCHEMA_ID_KIND.records(state)},
            "acls-and-fences.json": {"fences_recorded": FENCE_KIND.records(state),
                                     "acl_migration": bundle_view(ACL_MIGRATION_KIND.records(state))},
            "versions.json": versions(source, destination)}


def promotion_files(report: Mapping[str, Any], store: StateStore, act: Mapping[str, Any] | None,
                    preflight: Mapping[str, Any] | None, source: Cluster, destination: Cluster) -> dict[str, bytes]:
    """A promotion's bundle files, from its report (which holds the reconciliation, the groups' translations,
    the steps and the decode totals) and the state topic."""
    steps = report.get("steps") or {}
    files = _common(store, act, preflight, source, destination, {"steps": steps, "this_run": report.get("this_run")})
    files["schema-ids.json"]["decode_totals"] = report.get("decode_totals") or {}
    files["acls-and-fences.json"]["fences_lifted"] = ((steps.get("mark_promoted") or {}).get("summary") or {}
                                                      ).get("fences_lifted", 0)
    files["report.json"] = {k: v for k, v in report.items() if k != "report_path"}
    files["reconciliation.json"] = report.get("reconciliation") or {}
    files["groups.json"] = [
        {"group": r["group"], "side": "destination", "topic": r["destination_topic"], "partition": r["partition"],
         "offset": r["downstream_offset"], "method": r.get("method"), "source_topic": r.get("source_topic"),
         "source_offset": r.get("upstream_offset")}
        for r in report.get("groups") or [] if isinstance(r.get("downstream_offset"), int)]
    out = {name: canonical(value) for name, value in files.items()}
    offset_map = ((steps.get("final_translation") or {}).get("summary") or {}).get("offset_map")
    if offset_map:
        try:
            out["offset-map.json"] = as_path(offset_map).read_bytes()
        except (OSError, EvidenceError, ValueError) as exc:
            log.warning("evidence: offset map %s not readable (%s); the bundle goes without it", offset_map, exc)
    return out


def rollback_files(report: Mapping[str, Any], store: StateStore, act: Mapping[str, Any] | None,
                   preflight: Mapping[str, Any] | None, source: Cluster, destination: Cluster) -> dict[str, bytes]:
    """A rollback's bundle files: where each group resumes on the source, what was copied back, the run's
    report."""
    files = _common(store, act, preflight, source, destination, {"steps": report.get("steps") or {}})
    files["report.json"] = {k: v for k, v in report.items() if k != "report_path"}
    files["reconciliation.json"] = report.get("reconciliation") or {}
    groups = report.get("groups") or {}
    files["groups.json"] = [
        {"group": group, "side": "source", "topic": r["source_topic"], "partition": r["partition"],
         "offset": r["source_offset"], "method": r.get("method"), "destination_topic": r.get("destination_topic"),
         "destination_offset": r.get("destination_offset")}
        for group, rows in sorted(groups.items() if isinstance(groups, dict) else []) if isinstance(rows, list)
        for r in rows if isinstance(r, dict) and isinstance(r.get("source_offset"), int)
        and isinstance(r.get("partition"), int) and r.get("source_topic")]
    return {name: canonical(value) for name, value in files.items()}


def staged_files(report: Mapping[str, Any], store: StateStore, act: Mapping[str, Any] | None,
                 preflight: Mapping[str, Any] | None, source: Cluster, destination: Cluster) -> dict[str, bytes]:
    """A staged step's bundle files (``promote-groups``, ``promote-topics``): ``report`` holds the action and the
    names this run promoted; each unit's promotion record (its steps and their summaries, a group's translation
    decisions among them) comes from the state topic."""
    kind = GROUP_PROMOTION_KIND if report.get("action") == "promote-groups" else TOPIC_PROMOTION_KIND
    records = store.read_kind(kind)
    units = {name: records.get(name) for name in report.get("this_run") or []}
    files = _common(store, act, preflight, source, destination,
                    {"steps": {name: (record or {}).get("steps_done") for name, record in units.items()}})
    files["report.json"] = {"action": report.get("action"), "this_run": list(report.get("this_run") or []),
                            "promotions": units}
    files["reconciliation.json"] = {}
    files["groups.json"] = [
        {"group": d["group"], "side": "destination", "topic": d["destination_topic"], "partition": d["partition"],
         "offset": d["downstream_offset"], "method": d.get("method"), "source_topic": d.get("source_topic"),
         "source_offset": d.get("upstream_offset")}
        for record in units.values() if record for detail in (record.get("detail") or {}).values()
        if isinstance(detail, dict) for d in detail.get("decisions") or []
        if isinstance(d.get("downstream_offset"), int)]
    return {name: canonical(value) for name, value in files.items()}


def write_bundle(spec: MigrationSpec, store: StateStore, work_dir: str | StoragePath, action: str, run_id: str,
                 files: Mapping[str, bytes], private_key=None) -> dict[str, Any]:
    """Write the bundle: every file, then the signature, then the manifest. With ``private_key`` (from the spec's
    signing connection) the manifest is signed; the first signed bundle records the public key in the state topic,
    and a later bundle signed by another key is refused naming both fingerprints (nothing is written). Returns
    where it is and how it stands, for the run page."""
    public_key = public_bytes(private_key) if private_key is not None else None
    if public_key is None and spec.evidence.require_signature:
        raise EvidenceError(f"migration {spec.name!r}: evidence.require_signature is true and no signing key was "
                            f"read from connection {spec.evidence.signing_connection_id!r}")
    if public_key is not None:
        problem = signer_problem(public_key, recorded_key(store), spec.name)
        if problem:
            raise EvidenceError(problem)
    now_ms = int(time.time() * 1000)
    manifest = manifest_of(spec.name, action, run_id, now_ms, __version__, files, public_key).encode()
    folder = bundle_dir(work_dir, action, run_id)
    for name, data in sorted(files.items()):
        write_bytes(folder / name, data)
    if private_key is not None and public_key is not None:
        write_bytes(folder / SIGNATURE, sign(private_key, manifest))
        if recorded_key(store) is None:
            record_key(store, public_key, run_id, now_ms)
    write_bytes(folder / MANIFEST, manifest)
    verdict = verify(folder, trusted_key=public_key)
    log.info("evidence bundle %s: %d file(s), %s; %s", folder, len(files),
             "signed" if public_key else "unsigned (no evidence.signing_connection_id)", verdict.lines()[-1])
    return {"path": str(folder), "manifest": str(folder / MANIFEST), "signed": public_key is not None,
            "fingerprint": verdict.manifest.as_dict()["signing"].get("fingerprint") if verdict.manifest else None,
            "status": "verified" if verdict.ok else "NOT verified", "checked_at_ms": now_ms}


def read_bundle(folder: str | StoragePath) -> tuple[bytes | None, bytes | None, dict[str, bytes]]:
    """(manifest, signature, every other file) of a bundle folder, local or on the object store."""
    path = as_path(folder) if isinstance(folder, str) else folder
    if not is_local(path):
        path.fs.invalidate_cache()
    if not path.is_dir():
        raise EvidenceError(f"{folder}: no evidence bundle folder there")
    manifest = signature = None
    files: dict[str, bytes] = {}
    for child in path.iterdir():
        if not child.is_file() or child.name.endswith(".tmp"):
            continue
        data = child.read_bytes()
        if child.name == MANIFEST:
            manifest = data
        elif child.name == SIGNATURE:
            signature = data
        else:
            files[child.name] = data
    return manifest, signature, files


def verify(folder: str | StoragePath, trusted_key: bytes | None = None, require_signature: bool = False,
           source: Cluster | None = None, destination: Cluster | None = None,
           spec: MigrationSpec | None = None, store: StateStore | None = None) -> BundleVerdict:
    """The bundle checked against its manifest and signature; with the clusters, each partition of its
    reconciliation and each group's committed offset read again (``core.cutover.evidence`` says what each verdict
    means). ``store``: the state topic, whose recorded key (when ``trusted_key`` is None) the signature is held to."""
    if trusted_key is None and store is not None:
        trusted_key = recorded_key(store)
    manifest, signature, files = read_bundle(folder)
    verdict = verify_bundle(manifest, signature, files, trusted_key, require_signature)
    if not verdict.intact or (source is None and destination is None):
        return verdict
    import json

    rewriter = None
    if spec is not None and store is not None:
        from kafka_ferry.state.schema_ids import record_rewriter

        try:
            rewriter = record_rewriter(spec, store)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - the source side is then reported unreadable, not guessed
            log.warning("verify-evidence: schema id map not readable (%s)", exc)
    reconciliation = json.loads(files.get("reconciliation.json") or b"{}")
    groups = group_expectations(json.loads(files.get("groups.json") or b"[]"))
    checks = {"partitions": _partition_checks(reconciliation.get("partitions") or [], source, destination, rewriter),
              "groups": _group_checks(groups, {"source": source, "destination": destination})}
    return with_checks(verdict, checks)


def _partition_checks(rows: list[dict], source: Cluster | None, destination: Cluster | None,
                      rewriter) -> list[dict]:
    out: list[dict] = []
    for role, cluster, topic_field in (("source", source, "source_topic"),
                                       ("destination", destination, "destination_topic")):
        prefix = "source" if role == "source" else "destination"
        ranges = {(r[topic_field], r["partition"]): tuple(r[f"{prefix}_range"]) for r in rows}
        names = {tp: f"{tp[0]}-{tp[1]} ({role})" for tp in ranges}
        if cluster is None or not ranges:
            out += [{"name": names[tp], "verdict": UNREACHABLE, "detail": "not asked"} for tp in sorted(ranges)]
            continue
        try:
            ends = cluster.list_offsets(list(ranges), "latest")
        except Exception as exc:  # noqa: BLE001 - a cluster gone is said, per partition
            out += [{"name": names[tp], "verdict": UNREACHABLE, "detail": f"{type(exc).__name__}: {exc}"}
                    for tp in sorted(ranges)]
            continue
        for r in rows:
            tp = (r[topic_field], r["partition"])
            count: int | None
            digest: str | None
            try:
                count, digest = range_digests(cluster, {tp: ranges[tp]},
                                              rewriter if role == "source" else None)[tp]
            except Exception as exc:  # noqa: BLE001 - retention or a deleted topic: the range cannot be read
                log.info("verify-evidence: %s not readable: %s", names[tp], exc)
                count = digest = None
            verdict, detail = partition_verdict(r[f"{prefix}_count"], r[f"{prefix}_digest"], ranges[tp][1], count,
                                                digest, ends.get(tp))
            out.append({"name": names[tp], "verdict": verdict, "detail": detail})
    return out


def _group_checks(rows: list[dict], clusters: Mapping[str, Cluster | None]) -> list[dict]:
    out: list[dict] = []
    for side in ("source", "destination"):
        wanted = [r for r in rows if r["side"] == side]
        cluster = clusters[side]
        if not wanted:
            continue
        names = {id(r): f"{r['group']} {r['topic']}-{r['partition']} ({side})" for r in wanted}
        if cluster is None:
            out += [{"name": names[id(r)], "verdict": UNREACHABLE, "detail": "not asked"} for r in wanted]
            continue
        try:
            now = cluster.groups_offsets(sorted({r["group"] for r in wanted}))
        except Exception as exc:  # noqa: BLE001
            out += [{"name": names[id(r)], "verdict": UNREACHABLE if "connect" in str(exc).lower() else UNREADABLE,
                     "detail": f"{type(exc).__name__}: {exc}"} for r in wanted]
            continue
        for r in wanted:
            verdict, detail = group_verdict(r["offset"], (now.get(r["group"]) or {}).get((r["topic"], r["partition"])))
            out.append({"name": names[id(r)], "verdict": verdict, "detail": detail})
    return out
