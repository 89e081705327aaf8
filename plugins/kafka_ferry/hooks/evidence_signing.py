"""The evidence bundle's signing key, from an Airflow connection of type ``evidencesigning``: the Ed25519 private
key in its password (an unencrypted PKCS#8 PEM, or the 32-byte seed in base64 or hex).

Why a connection: the key must never be in the work dir the bundle is written to (anyone who may write there could
sign a forged bundle), nor in a spec, a log, XCom or argv. Errors name the connection and the field, never a byte of
the key. The public half is what a bundle carries and the state topic records.
"""

from __future__ import annotations

from airflow.sdk import BaseHook

from kafka_ferry.core.cutover.evidence import EvidenceError, load_private_key
from kafka_ferry.core.specs.connection_types import EVIDENCE_SIGNING


class EvidenceSigningHook(BaseHook):
    """One signing key per Airflow connection.

    :param evidence_signing_conn_id: the Airflow connection (type ``evidencesigning``); the key is its password.
    """

    conn_name_attr = "evidence_signing_conn_id"
    default_conn_name = "evidence_signing_default"
    conn_type = EVIDENCE_SIGNING
    hook_name = "Evidence signing key (kafka-ferry)"

    def __init__(self, evidence_signing_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.evidence_signing_conn_id = evidence_signing_conn_id

    def get_conn(self):
        """The Ed25519 private key (a ``cryptography`` key object, which prints no secret)."""
        conn = self.get_connection(self.evidence_signing_conn_id)
        if conn.conn_type not in (EVIDENCE_SIGNING,):
            raise EvidenceError(f"connection {self.evidence_signing_conn_id!r} is of type {conn.conn_type!r}, not "
                                f"{EVIDENCE_SIGNING!r}")
        return load_private_key(conn.password or "", f"connection {self.evidence_signing_conn_id!r} field password")
