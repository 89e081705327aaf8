"""The evidence signing key record (kind ``evidence-key``): the public key the first signed bundle recorded, which
every later bundle of the migration is held to (``core.cutover.evidence``). Written once; never replaced by a bundle."""

from __future__ import annotations

from kafka_ferry.core.common.state_records import EVIDENCE_KEY_KIND
from kafka_ferry.core.cutover.evidence import fingerprint
from kafka_ferry.state.protocol import StateStore

KEY = "signing"


def recorded_key(store: StateStore) -> bytes | None:
    record = store.read_kind(EVIDENCE_KEY_KIND).get(KEY)
    return bytes.fromhex(record["public_key"]) if record else None


def record_key(store: StateStore, public_key: bytes, run_id: str, now_ms: int) -> None:
    store.put(EVIDENCE_KEY_KIND, KEY, {"public_key": public_key.hex(), "fingerprint": fingerprint(public_key),
                                       "recorded_at_ms": now_ms, "run_id": run_id})
