"""The evidence bundle of a cutover: its manifest's layout, its signature, and what a verification says.

Why a bundle: after a promotion, a staged step or a rollback, what proves it right (the reconciliation, the offset
map, every group's translation, who triggered and confirmed it) is spread over run pages and work-dir files anyone
with write access there can change. The bundle gathers copies of them in one folder of the work dir
(``evidence/<action>-<run id>/``), and its manifest names every file with its SHA-256; signed with an Ed25519 key
that never reaches the work dir, a changed byte or a swapped manifest is found by anyone holding the public key.

Manifest layout (version 1; literal-byte tests in ``tests/unit/core/test_evidence.py``): canonical JSON, UTF-8, keys
sorted, compact separators, ASCII only (``\\uXXXX`` escapes), no trailing newline - so the signed bytes are one
function of the content, whoever writes them::

    {"action": "promote", "created_at_ms": 1, "files": [{"bytes": 2, "path": "act.json", "sha256": "<64 hex>"}],
     "format": "kafka-ferry-evidence", "kafka_ferry_version": "0.1.0", "migration": "orders", "run_id": "r1",
     "signing": {"algorithm": "ed25519", "fingerprint": "<16 hex>", "public_key": "<64 hex>"} | {"algorithm": "none"},
     "version": 1}

``files`` is sorted by path, never lists the manifest or its signature. The signature (``manifest.sig``) is the
64-byte Ed25519 signature of the manifest's exact bytes, written as lowercase hex. A key's fingerprint is the first
16 hex digits of the SHA-256 of its 32 raw public-key bytes.

A verification's verdict is per file (``ok``, ``changed``, ``missing``, ``unlisted``), per partition and per group
(``matches``, ``later`` - records appended or offsets committed after the bundle, not a mismatch - ``mismatch``,
``unreadable``, ``unreachable``). Pure: the bytes come in, verdicts go out; the stage reads the files and clusters.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_ferry.core.common.failures import Permanent

if TYPE_CHECKING:  # the key type, for the checker; imported where a key is used
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

FORMAT = "kafka-ferry-evidence"
VERSION = 1
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
ED25519 = "ed25519"
UNSIGNED = "none"
# a bundle's file names: lowercase, a folder level at most, never the manifest or its signature
_FILE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}(/[a-z0-9][a-z0-9._-]{0,99})?")
_HEX64 = re.compile(r"[0-9a-f]{64}")

# a file's verdict
OK, CHANGED, MISSING, UNLISTED = "ok", "changed", "missing", "unlisted"
# a partition's or group's verdict against the clusters as they are now
MATCHES, LATER, MISMATCH, UNREADABLE, UNREACHABLE = "matches", "later", "mismatch", "unreadable", "unreachable"


class EvidenceError(Permanent, ValueError):
    """A bundle, its manifest or a signing key that cannot be used as it is; the message names the file or field."""


def canonical(value: Any) -> bytes:
    """The one byte form of a JSON value: keys sorted, compact, ASCII; what the manifest and every JSON file of a
    bundle are written as (so writing the same content twice gives the same digest)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False,
                      default=str).encode("ascii")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint(public_key: bytes) -> str:
    """A public key's short name, for messages and pages: the first 16 hex digits of its SHA-256."""
    return sha256(public_key)[:16]


def file_name_problem(path: str) -> str | None:
    if path in (MANIFEST, SIGNATURE):
        return f"{path!r} is the manifest's own name"
    if not _FILE_NAME.fullmatch(path):
        return f"{path!r} is not a bundle file name (lowercase letters, digits, '.', '_', '-', one '/' at most)"
    return None


@dataclass(frozen=True)
class Manifest:
    """What a bundle holds: ``files`` maps each file's path to (SHA-256 hex, size in bytes)."""

    migration: str
    action: str
    run_id: str
    created_at_ms: int
    kafka_ferry_version: str
    files: Mapping[str, tuple[str, int]]
    public_key: bytes | None = None  # the signer's 32 raw bytes; None: unsigned

    def as_dict(self) -> dict[str, Any]:
        signing: dict[str, str] = {"algorithm": UNSIGNED}
        if self.public_key is not None:
            signing = {"algorithm": ED25519, "fingerprint": fingerprint(self.public_key),
                       "public_key": self.public_key.hex()}
        return {"action": self.action, "created_at_ms": self.created_at_ms,
                "files": [{"bytes": size, "path": path, "sha256": digest}
                          for path, (digest, size) in sorted(self.files.items())],
                "format": FORMAT, "kafka_ferry_version": self.kafka_ferry_version, "migration": self.migration,
                "run_id": self.run_id, "signing": signing, "version": VERSION}

    def encode(self) -> bytes:
        for path in self.files:
            problem = file_name_problem(path)
            if problem:
                raise EvidenceError(f"evidence manifest: file {problem}")
        return canonical(self.as_dict())

    @property
    def signed(self) -> bool:
        return self.public_key is not None


def manifest_of(migration: str, action: str, run_id: str, created_at_ms: int, version: str,
                files: Mapping[str, bytes], public_key: bytes | None = None) -> Manifest:
    """The manifest of these files' bytes."""
    return Manifest(migration, action, run_id, created_at_ms, version,
                    {path: (sha256(data), len(data)) for path, data in files.items()}, public_key)


def decode_manifest(data: bytes) -> Manifest:
    """A manifest read back, checked field by field; refused naming the field when it is not a version-1 manifest
    in canonical form (a manifest re-encoded by another writer is refused: its signature would not hold)."""
    where = MANIFEST
    try:
        raw = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise EvidenceError(f"{where}: not ASCII JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise EvidenceError(f"{where}: not a JSON object")
    if raw.get("format") != FORMAT:
        raise EvidenceError(f"{where}: field format is {raw.get('format')!r}, not {FORMAT!r}")
    if raw.get("version") != VERSION:
        raise EvidenceError(f"{where}: field version is {raw.get('version')!r}; this kafka-ferry reads version "
                            f"{VERSION}")
    for name, kind in (("migration", str), ("action", str), ("run_id", str), ("created_at_ms", int),
                       ("kafka_ferry_version", str), ("files", list), ("signing", dict)):
        if not isinstance(raw.get(name), kind) or isinstance(raw.get(name), bool):
            raise EvidenceError(f"{where}: field {name} is {raw.get(name)!r}, not a {kind.__name__}")
    files: dict[str, tuple[str, int]] = {}
    for i, entry in enumerate(raw["files"]):
        path, digest, size = (entry.get(k) if isinstance(entry, dict) else None for k in ("path", "sha256", "bytes"))
        problem = file_name_problem(path) if isinstance(path, str) else f"{path!r} is not a name"
        if problem or not isinstance(path, str) or not isinstance(digest, str) or not _HEX64.fullmatch(digest) \
                or not isinstance(size, int) or isinstance(size, bool) or size < 0 or path in files:
            raise EvidenceError(f"{where}: files[{i}] ({entry!r}) is not a path, a SHA-256 in lowercase hex and a "
                                f"size{': ' + problem if problem else ''}")
        files[path] = (digest, size)
    signing = raw["signing"]
    public_key = None
    if signing.get("algorithm") == ED25519:
        try:
            public_key = bytes.fromhex(signing.get("public_key") or "")
        except ValueError:
            public_key = b""
        if len(public_key) != 32 or signing.get("fingerprint") != fingerprint(public_key):
            raise EvidenceError(f"{where}: field signing.public_key is not a 32-byte Ed25519 key in hex with its "
                                "fingerprint")
    elif signing != {"algorithm": UNSIGNED}:
        raise EvidenceError(f"{where}: field signing.algorithm is {signing.get('algorithm')!r}, not {ED25519!r} "
                            f"or {UNSIGNED!r}")
    manifest = Manifest(raw["migration"], raw["action"], raw["run_id"], raw["created_at_ms"],
                        raw["kafka_ferry_version"], files, public_key)
    if manifest.encode() != data:
        raise EvidenceError(f"{where}: not in canonical form (keys sorted, compact, ASCII, files sorted by path): "
                            "it was written again by something else")
    return manifest


# --- keys and signatures --------------------------------------------------------------------------------------
def load_private_key(secret: str, where: str) -> Ed25519PrivateKey:
    """An Ed25519 private key from a connection's secret: a PEM (PKCS#8, unencrypted) or the 32-byte seed in
    base64 or hex. ``where`` names the connection and field in the message; the secret itself never is."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    text = (secret or "").strip()
    if not text:
        raise EvidenceError(f"{where}: empty; put an Ed25519 private key there (PEM, or its 32-byte seed in base64)")
    if text.startswith("-----BEGIN"):
        try:
            key = load_pem_private_key(text.encode(), password=None)
        except (ValueError, TypeError) as exc:
            raise EvidenceError(f"{where}: not an unencrypted PKCS#8 PEM key ({type(exc).__name__})") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise EvidenceError(f"{where}: a {type(key).__name__}, not an Ed25519 key")
        return key
    seed = None
    if re.fullmatch(r"[0-9a-fA-F]{64}", text):
        seed = bytes.fromhex(text)
    else:
        try:
            seed = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            seed = None
    if seed is None or len(seed) != 32:
        raise EvidenceError(f"{where}: neither a PEM key nor a 32-byte Ed25519 seed in base64 or hex")
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_bytes(private_key: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return bytes(private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def sign(private_key: Ed25519PrivateKey, manifest: bytes) -> bytes:
    """The signature file's bytes: the Ed25519 signature of the manifest, in lowercase hex."""
    return bytes(private_key.sign(manifest)).hex().encode("ascii")


def signature_holds(public_key: bytes, manifest: bytes, signature_file: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        signature = bytes.fromhex(signature_file.decode("ascii").strip())
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, manifest)
    except (InvalidSignature, ValueError, UnicodeDecodeError):
        return False
    return True


def signer_problem(signer: bytes, recorded: bytes | None, migration: str) -> str | None:
    """Why a key may not sign this migration's bundles: the state topic recorded another key at the first
    promotion. The message names both fingerprints."""
    if recorded is None or recorded == signer:
        return None
    return (f"migration {migration!r}: the evidence signing key has fingerprint {fingerprint(signer)}, the state "
            f"topic recorded {fingerprint(recorded)} at the first promotion; sign with that key (its connection "
            "was changed?)")


# --- verification ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileVerdict:
    path: str
    verdict: str
    detail: str = ""


@dataclass(frozen=True)
class BundleVerdict:
    """Whether a bundle is what was written: the signature, and every file against the manifest."""

    manifest: Manifest | None
    signature: str  # "valid", "unsigned", "invalid: ...", "refused: ..."
    files: tuple[FileVerdict, ...] = ()
    problem: str | None = None  # the manifest itself could not be read
    checks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # "partitions"/"groups": live re-reads

    @property
    def failed_files(self) -> list[FileVerdict]:
        return [f for f in self.files if f.verdict != OK]

    @property
    def intact(self) -> bool:
        """The signature holds (or the bundle is unsigned and no signature was required) and every file is as
        listed."""
        return self.problem is None and not self.failed_files and self.signature in ("valid", "unsigned")

    @property
    def ok(self) -> bool:
        """Intact, and nothing re-read from the clusters contradicts it (``later`` does not)."""
        return self.intact and not any(row["verdict"] == MISMATCH for rows in self.checks.values() for row in rows)

    def lines(self) -> list[str]:
        if self.problem:
            return [f"FAILED {self.problem}"]
        out = [f"signature: {self.signature}"]
        out += [f"FAILED {f.path}: {f.verdict}{' (' + f.detail + ')' if f.detail else ''}" for f in self.failed_files]
        if not self.failed_files:
            out.append(f"files: {len(self.files)} of {len(self.files)} as the manifest lists them")
        for kind, rows in self.checks.items():
            for row in rows:
                out.append(f"{kind[:-1]} {row['name']}: {row['verdict']}"
                           f"{' (' + row['detail'] + ')' if row.get('detail') else ''}")
        out.append("verified" if self.ok else "NOT verified")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "intact": self.intact, "signature": self.signature, "problem": self.problem,
                "manifest": self.manifest.as_dict() if self.manifest else None,
                "files": [asdict(f) for f in self.files], "checks": self.checks}


def verify_bundle(manifest_bytes: bytes | None, signature_file: bytes | None, files: Mapping[str, bytes],
                  trusted_key: bytes | None = None, require_signature: bool = False) -> BundleVerdict:
    """The verdict on a bundle read back: ``files`` holds every file found in its folder (but the manifest and its
    signature). ``trusted_key``: the key the state topic recorded; a bundle signed by another is refused naming
    both fingerprints. A changed file is named as changed, a listed file absent as missing, a file the manifest
    does not list as unlisted; a manifest swapped for another bundle's fails its signature or its digests."""
    if manifest_bytes is None:
        return BundleVerdict(None, "refused: no manifest", problem=f"{MANIFEST}: missing")
    try:
        manifest = decode_manifest(manifest_bytes)
    except EvidenceError as exc:
        return BundleVerdict(None, "refused: manifest unreadable", problem=str(exc))
    if manifest.public_key is None:
        signature = "unsigned"
        if require_signature or trusted_key is not None:
            signature = (f"refused: {MANIFEST} is unsigned" + (f", the state topic recorded key "
                                                                 f"{fingerprint(trusted_key)}" if trusted_key else ""))
    elif trusted_key is not None and trusted_key != manifest.public_key:
        signature = (f"refused: {MANIFEST} is signed by key {fingerprint(manifest.public_key)}, the state topic "
                     f"recorded {fingerprint(trusted_key)}")
    elif signature_file is None:
        signature = f"invalid: {SIGNATURE} is missing"
    elif not signature_holds(manifest.public_key, manifest_bytes, signature_file):
        signature = f"invalid: {SIGNATURE} does not hold for {MANIFEST} (key {fingerprint(manifest.public_key)})"
    else:
        signature = "valid"
    verdicts = []
    for path, (digest, size) in sorted(manifest.files.items()):
        data = files.get(path)
        if data is None:
            verdicts.append(FileVerdict(path, MISSING))
        elif sha256(data) != digest:
            verdicts.append(FileVerdict(path, CHANGED, f"SHA-256 {sha256(data)[:16]}..., the manifest lists "
                                                       f"{digest[:16]}...; {len(data)} bytes, listed {size}"))
        else:
            verdicts.append(FileVerdict(path, OK))
    verdicts += [FileVerdict(path, UNLISTED, "not in the manifest")
                 for path in sorted(set(files) - set(manifest.files))]
    return BundleVerdict(manifest, signature, tuple(verdicts))


def with_checks(verdict: BundleVerdict, checks: Mapping[str, list[dict[str, Any]]]) -> BundleVerdict:
    return BundleVerdict(verdict.manifest, verdict.signature, verdict.files, verdict.problem, dict(checks))


def partition_verdict(recorded_count: int, recorded_digest: str, recorded_end: int,
                      count_now: int | None, digest_now: str | None, end_now: int | None) -> tuple[str, str]:
    """A partition's recorded range read again: the same records (count and digest) are ``matches``, or ``later``
    when records were appended after the range's end since; other records in the range are ``mismatch``; a range
    no longer readable (retention, a deleted topic) is ``unreadable``."""
    if count_now is None or digest_now is None or end_now is None:
        return UNREADABLE, "the recorded range cannot be read now"
    if count_now == recorded_count and digest_now == recorded_digest:
        if end_now > recorded_end:
            return LATER, f"{end_now - recorded_end} record(s) appended after offset {recorded_end}"
        return MATCHES, ""
    if count_now < recorded_count and end_now >= recorded_end:
        return UNREADABLE, f"{count_now} of {recorded_count} record(s) still readable (retention?)"
    same = "equal" if digest_now == recorded_digest else "differ"
    return MISMATCH, f"{count_now} record(s) now, {recorded_count} recorded; digests {same}"


def group_verdict(recorded: int, now: int | None) -> tuple[str, str]:
    """A group's committed offset on one partition against the bundle's: equal ``matches``; ahead ``later`` (it
    consumed since); behind or gone ``mismatch`` (someone moved it back or deleted the group)."""
    if now is None:
        return MISMATCH, f"no committed offset now; {recorded} recorded"
    if now == recorded:
        return MATCHES, ""
    if now > recorded:
        return LATER, f"committed {now}, {now - recorded} past the recorded {recorded}"
    return MISMATCH, f"committed {now}, behind the recorded {recorded}"


def group_expectations(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The groups file's rows, checked: group, side (source or destination), topic, partition, offset, method."""
    out = []
    for i, row in enumerate(rows):
        if row.get("side") not in ("source", "destination") or not isinstance(row.get("offset"), int) \
                or not isinstance(row.get("partition"), int) or not row.get("group") or not row.get("topic"):
            raise EvidenceError(f"groups.json: row {i} ({dict(row)!r}) needs group, side (source or destination), "
                                "topic, partition and offset")
        out.append(dict(row))
    return out
