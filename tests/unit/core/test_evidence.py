"""The evidence manifest's layout in literal bytes, its signature, and every verdict (core.cutover.evidence)."""

from __future__ import annotations

import base64
import re

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_ferry.core.cutover.evidence import (
    CHANGED,
    LATER,
    MATCHES,
    MISMATCH,
    MISSING,
    OK,
    UNLISTED,
    UNREADABLE,
    EvidenceError,
    canonical,
    decode_manifest,
    fingerprint,
    group_verdict,
    load_private_key,
    manifest_of,
    partition_verdict,
    public_bytes,
    sign,
    signer_problem,
    verify_bundle,
)

SEED = bytes(range(32))
KEY = Ed25519PrivateKey.from_private_bytes(SEED)
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(32))
FILES = {"act.json": b'{"user":"ana"}', "reconciliation.json": b'{"ok":true}'}


def bundle(files=FILES, key=KEY, run_id="r1"):
    manifest = manifest_of("orders", "promote", run_id, 1700000000000, "0.1.0", files,
                           public_bytes(key) if key else None).encode()
    return manifest, (sign(key, manifest) if key else None)


def test_the_unsigned_manifest_in_literal_bytes():
    manifest, _ = bundle({"act.json": b"{}"}, key=None)
    assert manifest == (
        b'{"action":"promote","created_at_ms":1700000000000,"files":[{"bytes":2,"path":"act.json","sha256":'
        b'"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}],"format":"kafka-ferry-evidence",'
        b'"kafka_ferry_version":"0.1.0","migration":"orders","run_id":"r1","signing":{"algorithm":"none"},'
        b'"version":1}')


def test_the_signed_manifest_names_the_key_and_its_fingerprint_in_literal_bytes():
    manifest, signature = bundle({})
    public = public_bytes(KEY)
    assert public.hex() == "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
    assert fingerprint(public) == "56475aa75463474c"
    assert manifest.endswith(b'"signing":{"algorithm":"ed25519","fingerprint":"56475aa75463474c","public_key":'
                             b'"03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"},"version":1}')
    # Ed25519 is deterministic: the same key and manifest always give these 128 hex digits
    assert len(signature) == 128 and signature == sign(KEY, manifest)


def test_canonical_json_is_sorted_compact_ascii():
    assert canonical({"b": 1, "a": ["é", None]}) == b'{"a":["\\u00e9",null],"b":1}'


def test_an_intact_signed_bundle_verifies():
    manifest, signature = bundle()
    verdict = verify_bundle(manifest, signature, FILES, trusted_key=public_bytes(KEY))
    assert verdict.ok and verdict.signature == "valid"
    assert [(f.path, f.verdict) for f in verdict.files] == [("act.json", OK), ("reconciliation.json", OK)]
    assert verdict.lines()[-1] == "verified"


def test_a_changed_missing_or_unlisted_file_fails_naming_it():
    manifest, signature = bundle()
    changed = {**FILES, "act.json": b'{"user":"eve"}'}
    verdict = verify_bundle(manifest, signature, changed)
    assert not verdict.ok and [(f.path, f.verdict) for f in verdict.failed_files] == [("act.json", CHANGED)]
    assert any(line.startswith("FAILED act.json: changed") for line in verdict.lines())
    verdict = verify_bundle(manifest, signature, {"act.json": FILES["act.json"]})
    assert [(f.path, f.verdict) for f in verdict.failed_files] == [("reconciliation.json", MISSING)]
    verdict = verify_bundle(manifest, signature, {**FILES, "extra.json": b"{}"})
    assert [(f.path, f.verdict) for f in verdict.failed_files] == [("extra.json", UNLISTED)]


def test_a_swapped_manifest_fails_its_signature_or_its_digests():
    manifest, signature = bundle()
    other_manifest, other_signature = bundle({**FILES, "act.json": b'{"user":"eve"}'}, run_id="r2")
    # the other bundle's manifest with this bundle's signature: the signature does not hold
    verdict = verify_bundle(other_manifest, signature, FILES)
    assert not verdict.ok and verdict.signature.startswith("invalid: manifest.sig does not hold for manifest.json")
    # the other bundle's manifest with its own signature: the files do not match it, named
    verdict = verify_bundle(other_manifest, other_signature, FILES)
    assert verdict.signature == "valid" and [f.path for f in verdict.failed_files] == ["act.json"]


def test_a_bundle_signed_by_another_key_is_refused_naming_both_fingerprints():
    manifest, signature = bundle(key=OTHER)
    verdict = verify_bundle(manifest, signature, FILES, trusted_key=public_bytes(KEY))
    assert not verdict.ok
    assert fingerprint(public_bytes(OTHER)) in verdict.signature and "56475aa75463474c" in verdict.signature
    problem = signer_problem(public_bytes(OTHER), public_bytes(KEY), "orders")
    assert problem is not None and fingerprint(public_bytes(OTHER)) in problem and "56475aa75463474c" in problem
    assert signer_problem(public_bytes(KEY), public_bytes(KEY), "orders") is None
    assert signer_problem(public_bytes(KEY), None, "orders") is None


def test_an_unsigned_bundle_passes_unless_a_signature_is_required_or_a_key_recorded():
    manifest, _ = bundle(key=None)
    assert verify_bundle(manifest, None, FILES).ok
    assert not verify_bundle(manifest, None, FILES, require_signature=True).ok
    refused = verify_bundle(manifest, None, FILES, trusted_key=public_bytes(KEY))
    assert not refused.ok and "56475aa75463474c" in refused.signature


def test_a_missing_signature_or_manifest_fails():
    manifest, _ = bundle()
    assert verify_bundle(manifest, None, FILES).signature == "invalid: manifest.sig is missing"
    verdict = verify_bundle(None, None, FILES)
    assert not verdict.ok and verdict.problem == "manifest.json: missing"


@pytest.mark.parametrize("mangle, field", [
    (lambda m: m.replace(b'"version":1', b'"version":2'), "field version"),
    (lambda m: m.replace(b'"format":"kafka-ferry-evidence"', b'"format":"x"'), "field format"),
    (lambda m: m.replace(b'"sha256":"', b'"sha256":"zz'), "files[0]"),
    (lambda m: m.replace(b"{", b"{ ", 1), "canonical form"),
    (lambda m: b"\xff" + m, "not ASCII JSON"),
])
def test_a_manifest_out_of_its_layout_is_refused_naming_the_field(mangle, field):
    manifest, _ = bundle(key=None)
    with pytest.raises(EvidenceError, match=re.escape(field)):
        decode_manifest(mangle(manifest))
    assert field in (verify_bundle(mangle(manifest), None, FILES).problem or "")


def test_a_manifest_round_trips():
    manifest, _ = bundle()
    assert decode_manifest(manifest).encode() == manifest


@settings(max_examples=60, deadline=None)
@given(files=st.dictionaries(st.from_regex(r"[a-z][a-z0-9_-]{0,8}\.json", fullmatch=True), st.binary(max_size=64),
                             min_size=1, max_size=5),
       data=st.data())
def test_any_one_changed_byte_names_exactly_its_file(files, data):
    manifest, signature = bundle(files)
    assert verify_bundle(manifest, signature, files).ok
    path = data.draw(st.sampled_from(sorted(files)))
    content = files[path] or b"\x00"
    at = data.draw(st.integers(0, len(content) - 1))
    flipped = content[:at] + bytes([content[at] ^ data.draw(st.integers(1, 255))]) + content[at + 1:]
    tampered = {**files, path: flipped if files[path] else b"\x00"}
    verdict = verify_bundle(manifest, signature, tampered)
    assert [f.path for f in verdict.failed_files] == [path] and not verdict.ok


@pytest.mark.parametrize("args, expected", [
    ((5, "d", 10, 5, "d", 10), MATCHES),
    ((5, "d", 10, 5, "d", 13), LATER),       # appended after the range: reported as later, not a mismatch
    ((5, "d", 10, 5, "x", 10), MISMATCH),
    ((5, "d", 10, 6, "x", 10), MISMATCH),
    ((5, "d", 10, 3, "x", 10), UNREADABLE),  # part of the range gone (retention)
    ((5, "d", 10, None, None, None), UNREADABLE),
])
def test_partition_verdicts(args, expected):
    assert partition_verdict(*args)[0] == expected


def test_group_verdicts():
    assert group_verdict(10, 10) == (MATCHES, "")
    assert group_verdict(10, 12)[0] == LATER
    assert group_verdict(10, 8)[0] == MISMATCH
    assert group_verdict(10, None)[0] == MISMATCH


def test_private_keys_from_a_connection_secret():
    pem = KEY.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
    for secret in (pem, base64.b64encode(SEED).decode(), SEED.hex()):
        assert public_bytes(load_private_key(secret, "connection 'k' field password")) == public_bytes(KEY)
    for secret in ("", "not a key", base64.b64encode(b"short").decode()):
        with pytest.raises(EvidenceError, match="connection 'k' field password") as raised:
            load_private_key(secret, "connection 'k' field password")
        assert secret not in str(raised.value) or not secret
