"""The checks that gate promotion, shared by the sensors (poke) and their triggers (deferred).

Why one place: a poke and a trigger must decide identically. Each check is a blocking function of hooks
and primitives returning ``(ready, details)``; triggers run it with ``asyncio.to_thread``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping

from kafka_ferry.core.common.state_records import partition_key
from kafka_ferry.core.offsets.groups_ahead import refuse_groups_ahead, settled_translation
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.state.offset_decisions import expected_group_offsets, stored_decisions
from kafka_ferry.state.progress import read_progress
from kafka_ferry.state.promotion import promotion_records, quiesce_mark, save_quiesce_mark, step_done
from kafka_ferry.state.store import MigrationStateStore


def replication_lag(source: KafkaCluster, store: MigrationStateStore, topics: Iterable[str]) -> dict:
    """Per partition: source end (last stable offset) minus the copy's next upstream offset."""
    parts = source.partitions_of(topics)
    ends = source.list_offsets(parts, "latest", read_committed=True)
    starts = source.list_offsets(parts, "earliest")
    progress = read_progress(store)
    lags = {}
    for tp in parts:
        copied = progress[tp].next_upstream_offset if tp in progress else starts[tp]
        lags[partition_key(*tp)] = max(0, ends[tp] - max(copied, starts[tp]))
    worst = max(lags, key=lags.__getitem__) if lags else None
    return {"max_lag": lags[worst] if worst else 0, "worst": worst, "total_lag": sum(lags.values()),
            "partitions": len(lags)}


def nothing_to_copy(source: KafkaCluster, store: MigrationStateStore, topics: Iterable[str]) -> bool:
    """True when a copy plan of ``topics`` now would be empty and record no gap: every partition's stored next
    offset is its last stable offset, at or past its log start (none stored: the partition is empty). One batched
    read of each bound and the stored progress; the promotion's final copy asks it first, so a quiesced source the
    last catch-up copied to its end costs no lease, no plan and no Spark job inside the cutover."""
    parts = source.partitions_of(topics)
    ends = source.list_offsets(parts, "latest", read_committed=True)
    starts = source.list_offsets(parts, "earliest")
    progress = read_progress(store)
    return all(progress[tp].next_upstream_offset == ends[tp] >= starts[tp] if tp in progress
               else starts[tp] == ends[tp] for tp in parts)


def check_replication_lag(source, store, topics, max_lag: int) -> tuple[bool, dict]:
    lag = replication_lag(source, store, topics)
    return lag["max_lag"] <= max_lag, lag


def source_end_offsets(source: KafkaCluster, topics: Iterable[str]) -> dict[str, int]:
    """High watermarks (read_uncommitted): an open transaction is activity too."""
    parts = source.partitions_of(topics)
    ends = source.list_offsets(parts, "latest", read_committed=False)
    return {partition_key(*tp): o for tp, o in sorted(ends.items())}


def fingerprint(offsets: Mapping[str, int]) -> str:
    return hashlib.sha256(json.dumps(sorted(offsets.items())).encode()).hexdigest()[:32]


def check_quiesced_persistent(source, store: MigrationStateStore, topics, window_s: float,
                              now_s: float | None = None) -> tuple[bool, dict]:
    """Quiesced when the end offsets match the ones stored at least ``window_s`` ago (survives reschedules)."""
    now = time.time() if now_s is None else now_s
    current = fingerprint(source_end_offsets(source, topics))
    seen = quiesce_mark(store)
    if not seen or seen.get("fingerprint") != current:
        save_quiesce_mark(store, current, now)
        return False, {"unchanged_for_s": 0.0, "window_s": window_s}
    unchanged = now - seen["since_s"]
    return unchanged >= window_s, {"unchanged_for_s": round(unchanged, 3), "window_s": window_s}


def active_groups(source: KafkaCluster, groups: Iterable[str]) -> dict[str, str]:
    """Groups with members on the source -> why they count as active."""
    return {g: info.describe() for g, info in source.describe_groups(groups).items() if info.is_active}


def check_groups_inactive(source, groups) -> tuple[bool, dict]:
    active = active_groups(source, groups)
    return not active, {"active": active}


def group_offset_mismatches(destination: KafkaCluster,
                            expected: Mapping[str, Mapping[tuple[str, int], int]],
                            committed_by_group: Mapping[str, Mapping[tuple[str, int], int]] | None = None
                            ) -> dict[str, str]:
    """Per group, the first partition whose committed destination offset differs from the translation."""
    out = {}
    # one round of requests per poke, not one per group; or the offsets the caller read already
    all_committed = committed_by_group if committed_by_group is not None else destination.groups_offsets(expected)
    for group, offsets in sorted(expected.items()):
        committed = all_committed[group]
        for tp, want in sorted(offsets.items()):
            if committed.get(tp) != want:
                out[group] = f"{tp[0]}-{tp[1]} committed {committed.get(tp)}, translation {want}"
                break
    return out


def check_group_offsets_synced(destination, store: MigrationStateStore, migration: str | None = None
                               ) -> tuple[bool, dict]:
    """Synced when every group's destination offsets equal the final translation; a group committed past it raises
    ``DestinationGroupsAhead`` (permanent: nothing moves it back while waiting, ``core.offsets.groups_ahead``)."""
    state = promotion_records(store)
    if not step_done(state, "final_translation"):
        return False, {"waiting_for": "final_translation"}
    expected = expected_group_offsets(stored_decisions(state))
    committed = destination.groups_offsets(expected)  # one round of requests for all groups
    refuse_groups_ahead(migration or store.topic, expected, committed)
    mismatches = group_offset_mismatches(destination, expected, committed)
    return not mismatches, {"mismatches": mismatches}


def refuse_settled_groups_ahead(spec, source: KafkaCluster, destination: KafkaCluster, store: MigrationStateStore,
                                mode: str, groups: Iterable[str] | None = None) -> dict[str, int]:
    """Before a promotion copies or commits anything (the pre-flight): refuse, with ``DestinationGroupsAhead``, a
    group whose destination offset is past a translation no final copy can change (``core.offsets.groups_ahead``); reads
    only. ``groups``: only these (``promote-groups``), else every group the promotion would commit. Returns how many
    partitions were decided now and how many are left to the commit step (their translation may still move)."""
    from kafka_ferry.translation.translate import translate_migration  # the translation stage: only when promoting

    decisions = translate_migration(spec, source, destination, store, groups, catch_up=True).decisions
    translated = sorted({d.group for d in decisions})
    settled = settled_translation(decisions, active_groups(source, translated))
    refuse_groups_ahead(spec.name, settled, destination.groups_offsets(settled) if settled else {}, mode=mode)
    decided = sum(len(offsets) for offsets in settled.values())
    return {"decided": decided, "left_to_commit": sum(d.downstream_offset is not None for d in decisions) - decided}
