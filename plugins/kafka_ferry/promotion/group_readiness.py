"""Which migrated source groups are ready to promote: no members, and no commit for a while.

Kafka keeps no commit time per group, so a commit is seen as a change of the group's committed offsets between two
looks; the state topic keeps the last fingerprint and when it changed (kind ``group_activity``). A group seen for the
first time counts as having committed at that look (never guess it is quiet).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from kafka_ferry.core.cutover.staged_cutover import GroupReadiness, group_readiness
from kafka_ferry.state.group_activity import group_activity, save_group_activity
from kafka_ferry.state.progress import migrated_groups
from kafka_ferry.state.staged_cutover import promoted_groups
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.storage.workdir import StoragePath, as_path, read_text, write_text


def ready_groups(source, store: MigrationStateStore, quiet_ms: int, now_ms: int | None = None) -> list[GroupReadiness]:
    """Every migrated group with whether it can be promoted now and why (one line per group for a pre-flight log)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    state = store.read_all()
    groups = sorted(migrated_groups(store, state))
    seen = group_activity(store, state)
    # an undescribed group (core.common.cluster_model.UNDESCRIBED_STATE) is left out: "not described", never ready
    members = {g: info.member_count for g, info in source.describe_groups(groups).items() if info.described}
    last_change, changed = {}, {}
    committed = source.groups_offsets(groups)  # read together: one round of requests, not one per group
    for g in groups:
        offsets = committed[g]
        digest = hashlib.sha256(json.dumps(sorted((f"{t}:{p}", o) for (t, p), o in offsets.items()))
                                .encode()).hexdigest()
        previous = seen.get(g)
        if previous is None or previous.get("fingerprint") != digest:
            changed[g] = {"fingerprint": digest, "changed_at_ms": now_ms}
            last_change[g] = now_ms
        else:
            last_change[g] = int(previous["changed_at_ms"])
    if changed:
        save_group_activity(store, changed)
    return group_readiness(groups, members, last_change, promoted_groups(store, state), now_ms, quiet_ms)


READY_FILE = "ready-groups.json"


def write_ready_file(migration_dir: Path | StoragePath, readiness: list[GroupReadiness], now_ms: int) -> StoragePath:
    """The readiness a catch-up run saw, for the trigger form (read when the DAG is parsed, no Kafka call there)."""
    return write_text(as_path(migration_dir) / READY_FILE, json.dumps(
        {"as_of_ms": now_ms, "groups": [{"group": r.group, "ready": r.ready, "reason": r.reason}
                                        for r in readiness]}, indent=1))


def read_ready_file(migration_dir: Path | StoragePath) -> tuple[list[str], int | None]:
    """(groups ready at the last look, when that was); ([], None) when no run looked yet or the file is unreadable."""
    try:
        seen = json.loads(read_text(as_path(migration_dir) / READY_FILE))
        return sorted(g["group"] for g in seen["groups"] if g["ready"]), int(seen["as_of_ms"])
    except (OSError, ValueError, KeyError, TypeError):
        return [], None
