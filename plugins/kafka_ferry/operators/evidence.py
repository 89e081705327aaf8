"""The evidence bundle from a task (``promotion.evidence``): the signing key read from the spec's connection, the
pre-flight's result pulled from XCom, the bundle written into the migration's work dir. Thin: what a bundle holds
and how it is verified are below.

Why the key is read here and handed down as an object: it comes from an Airflow connection (type
``evidencesigning``), and only this floor reads connections; it is never written to the work dir, a log or XCom.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafka_ferry.copy.plan import work_dir
from kafka_ferry.hooks.evidence_signing import EvidenceSigningHook
from kafka_ferry.promotion.evidence import write_bundle

FilesOf = Callable[..., dict[str, bytes]]


def signing_key(spec):
    """The spec's Ed25519 private key, or None when it names no signing connection (the bundle is unsigned)."""
    conn_id = spec.evidence.signing_connection_id
    return EvidenceSigningHook(conn_id).get_conn() if conn_id else None


def write_evidence(operator, context: Any, action: str, report: Mapping[str, Any], act: Mapping[str, Any] | None,
                   files_of: FilesOf, folder=None) -> dict[str, Any]:
    """Gather, sign and write the bundle of this run; returns its path and status for the run page."""
    ti = context.get("ti")
    preflight = ti.xcom_pull(task_ids="preflight") if ti is not None else None
    files = files_of(report, operator.state_store, act, preflight if isinstance(preflight, dict) else None,
                     operator.source_cluster, operator.destination_cluster)
    evidence = write_bundle(operator.spec, operator.state_store, folder or work_dir(operator.spec.name), action,
                            str(context.get("run_id") or operator.task_id), files, signing_key(operator.spec))
    operator.log.info("evidence bundle: %s (%s, %s)", evidence["path"],
                      "signed, key " + str(evidence["fingerprint"]) if evidence["signed"] else "unsigned",
                      evidence["status"])
    return evidence
