"""``kafka-ferry verify-evidence BUNDLE [--spec SPEC] [--json]``: a cutover's evidence bundle checked.

BUNDLE is the bundle's folder, a local path or the work dir's object store URL (``s3://bucket/prefix/<migration>/
evidence/<action>-<run>``; the credentials are the work dir's own connection, ``KFERRY_WORK_DIR_CONN_ID``, never the
URL). The signature and every file's SHA-256 are checked (a failure names the file). With ``--spec`` the
migration's clusters are read again, where they answer: each partition of the bundle's reconciliation and each
group's committed offset, ``later`` for what was appended or consumed after the bundle (not a mismatch); and the
signature is held to the key the migration's state topic recorded at its first promotion.

Exit 0: verified; 1: not verified (a file changed, missing or unlisted, a signature that does not hold or another
key, a mismatch on a cluster); 2: a wrong invocation.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kafka_ferry.core.cutover.evidence import EvidenceError


def add_parser(commands) -> None:
    text = ("check an evidence bundle: its signature, every file's SHA-256 and, with --spec, both clusters now "
            "(changes nothing)")
    command = commands.add_parser("verify-evidence", help=text, description=text)
    command.add_argument("bundle", help="the bundle's folder: a local path or the work dir's object store URL")
    command.add_argument("--spec", help="the migration's YAML file: re-read both clusters and hold the signature "
                                        "to the key its state topic recorded")
    command.add_argument("--require-signature", action="store_true",
                         help="an unsigned bundle fails (without --spec's recorded key, any valid key passes)")
    command.add_argument("--json", action="store_true", help="one JSON document on stdout instead of the lines")


def bundle_path(text: str):
    """A local folder, or a URL on the work dir's store with the work dir's connection."""
    from kafka_ferry.storage.workdir import _URL, object_path, setting

    if _URL.fullmatch(text) and not text.lower().startswith("file://"):
        return object_path(text.rstrip("/"), setting()[1], origin="verify-evidence BUNDLE")
    return Path(text.removeprefix("file://"))


def run(args: argparse.Namespace) -> int:
    from kafka_ferry.promotion.evidence import verify

    source = destination = spec = store = None
    if args.spec:
        from kafka_ferry.cli import commands
        from kafka_ferry.state.store import MigrationStateStore

        spec = commands.load(Path(args.spec).resolve())
        source, destination = (commands.cluster(spec.source.connection_id),
                               commands.cluster(spec.destination.connection_id))
        store = MigrationStateStore(destination, spec.state_topic_name)
    try:
        verdict = verify(bundle_path(args.bundle), require_signature=args.require_signature, source=source,
                         destination=destination, spec=spec, store=store)
    except EvidenceError as exc:
        print(f"kafka-ferry verify-evidence: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"bundle": args.bundle, **verdict.as_dict()}, indent=1, default=str))
    else:
        print(f"bundle {args.bundle}")
        for line in verdict.lines():
            print(f"  {line}")
    return 0 if verdict.ok else 1
