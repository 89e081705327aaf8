"""Translate every migrated group's committed source offsets, write checkpoints, commit destination groups.

Why in this order: translation only reads (sync log, copy progress, source commits), so it can run after
every copy batch; checkpoints are MM2's public record of it; committing to destination groups changes
what consumers see, so it is guarded: only groups with no members (checked first, and the broker refuses
anyway), never backwards unless ``allow_rewind``, and with the source commit's metadata kept.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kafka_ferry.copy.plan import work_dir
from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.cutover.rollback_plan import across_rollback
from kafka_ferry.core.cutover.staged_cutover import groups_to_commit
from kafka_ferry.core.offsets.mm2_wire import Checkpoint, offset_syncs_topic
from kafka_ferry.core.offsets.offset_decisions import OffsetDecision, PartitionCopy, partition_copy, translate_groups
from kafka_ferry.core.offsets.offset_translation import TranslationMethod
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.state.progress import migrated_groups, read_progress
from kafka_ferry.state.rollback import copy_back_progress, recorded_copy_back, refuse_unseen_copy_back
from kafka_ferry.state.staged_cutover import promoted_groups
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.storage.workdir import StoragePath
from kafka_ferry.translation.offset_map import write_offset_map
from kafka_ferry.translation.sync_log import read_migration_syncs, read_offset_syncs, write_checkpoints

log = logging.getLogger(__name__)



def default_work_dir(spec: MigrationSpec) -> StoragePath:
    """Per-migration files (offset maps, reports), next to the copy's plans and reports."""
    return work_dir(spec.name)


def load_partition_copies(
    spec: MigrationSpec, source: Cluster, destination: Cluster,
    progress: Mapping[tuple[str, int], PartitionProgress],
) -> dict[tuple[str, int], PartitionCopy]:
    """Join progress, the sync log and both clusters' partition bounds into one PartitionCopy each."""
    if not progress:
        return {}
    source_parts = sorted(progress)
    dest_parts = [(progress[k].destination_topic, k[1]) for k in source_parts]
    # Four independent reads, each one round of requests: in flight together, the promotion waits for the
    # slowest instead of their sum (translation, reconciliation and the rollback plan each join them).
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="kferry-copies") as pool:
        syncs_f = pool.submit(read_migration_syncs, spec, source, destination)
        source_start_f = pool.submit(source.list_offsets, source_parts, "earliest")
        dest_start_f = pool.submit(destination.list_offsets, dest_parts, "earliest")
        dest_end_f = pool.submit(destination.list_offsets, dest_parts, "latest")
        syncs, source_start = syncs_f.result(), source_start_f.result()
        dest_start, dest_end = dest_start_f.result(), dest_end_f.result()
    return {
        key: partition_copy(progress[key], syncs.get(key, ()), source_start[key], dest_start[dest],
                            dest_end[dest])
        for key, dest in zip(source_parts, dest_parts, strict=True)
    }


def empty_partition_copies(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                           partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], PartitionCopy]:
    """Partitions the copy never planned because the source holds nothing there (log start == end).

    The planner writes no progress for them, yet a group may have committed there; every record it
    will read arrives on the destination later, so it resumes at the destination's start.
    """
    partitions = sorted(partitions)
    if not partitions:
        return {}
    starts = source.list_offsets(partitions, "earliest")
    ends = source.list_offsets(partitions, "latest")
    empty = [tp for tp in partitions if starts[tp] == ends[tp]]
    dest = {tp: (spec.topics.rename.destination_topic(tp[0]), tp[1]) for tp in empty}
    dest_start = destination.list_offsets(dest.values(), "earliest")
    dest_end = destination.list_offsets(dest.values(), "latest")
    return {tp: partition_copy(PartitionProgress(tp[0], tp[1], dest[tp][0], ends[tp]), (), starts[tp],
                               dest_start[dest[tp]], dest_end[dest[tp]]) for tp in empty}


def source_commits(source: KafkaCluster, groups: Mapping[str, Iterable[str]]
                   ) -> dict[str, dict[tuple[str, int], tuple[int, str]]]:
    """Committed (offset, metadata) of each group on its migrated source topics."""
    committed = source.groups_offsets_with_metadata(groups)  # one round of requests, not one per group
    out = {}
    for group, topics in groups.items():
        wanted = set(topics)
        out[group] = {tp: om for tp, om in committed[group].items() if tp[0] in wanted}
    return out


@dataclass
class TranslationResult:
    decisions: list[OffsetDecision]
    copies: dict[tuple[str, int], PartitionCopy]

    @property
    def flagged(self) -> list[OffsetDecision]:
        return [d for d in self.decisions if d.flagged]

    def summary(self) -> dict:
        methods: dict[str, int] = defaultdict(int)
        for d in self.decisions:
            methods[d.method] += 1
        return {"groups": len({d.group for d in self.decisions}), "decisions": len(self.decisions),
                "partitions": len(self.copies), "methods": dict(sorted(methods.items())),
                "flagged": [d.describe() for d in self.flagged]}


def translate_migration(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                        store: MigrationStateStore, groups: Iterable[str] | None = None, *,
                        catch_up: bool = False) -> TranslationResult:
    """Read everything and decide, logging each decision with its reason; changes nothing.

    ``catch_up``: the translation after a catch-up batch, whose copy may stop short of the groups' commits (a
    per-partition cap, a window): a group committed beyond the copy is then expected, clamped to the copied end
    and translated again after the next batch, so those clamps are one INFO line per batch, not a WARNING each.
    Everywhere else (the promotion, after its final copy) a clamp is a finding and stays a warning."""
    state = store.read_all()
    copies = load_partition_copies(spec, source, destination, read_progress(store, state))
    wanted = migrated_groups(store, state)
    if groups is not None:
        wanted = {g: t for g, t in wanted.items() if g in set(groups)}
    # A promoted group's offsets were translated once, by its promotion; from then on its consumers own them
    # (invariant A of core.cutover.staged_cutover), so no later run translates, checkpoints or commits them again.
    # Read from the snapshot above: a group promoted after it is translated once more from its final source
    # commit (the same answer its promotion gave), and a caller that commits re-reads the promotions first.
    translating = set(groups_to_commit(wanted, promoted_groups(store, state)))
    for group in sorted(set(wanted) - translating):
        log.info("translate: group %s is promoted: its consumers own its offsets, not translated again", group)
    wanted = {g: t for g, t in wanted.items() if g in translating}
    commits = source_commits(source, wanted)
    uncopied = {tp for offsets in commits.values() for tp in offsets if tp not in copies}
    copies.update(empty_partition_copies(spec, source, destination, uncopied))
    decisions = translate_groups(commits, copies)
    back = copied_back(spec, source, store, state)
    if back:  # a rollback copied records back: groups among them resume by both sync logs
        decisions = [across_rollback(d, copies.get((d.source_topic, d.partition)),
                                     back.get((d.destination_topic, d.partition))) for d in decisions]
    expected = [d for d in decisions if catch_up and d.method == TranslationMethod.AHEAD_OF_COPY]
    quiet = {id(d) for d in expected}
    # One line per decision only where it says something (a flagged one, at warning); the rest at debug, and one
    # summary: a tenant of 2,000 partitions and 200 groups made 4,400 INFO lines here, a second of the cutover.
    for d in decisions:
        if d.flagged and id(d) not in quiet:
            log.warning("translate: %s", d.describe())
        else:
            log.debug("translate: %s", d.describe())
    if decisions:  # the methods per decision are in the result's summary (and the promotion report)
        log.info("translate: %d group partition(s) of %d group(s), %d flagged", len(decisions),
                 len({d.group for d in decisions}), sum(1 for d in decisions if d.flagged))
    if expected:
        log.info("translate: %d group partition(s) committed beyond what the copy has reached so far (this batch "
                 "stopped at its cap or window): clamped to the copied end, translated again after the next batch: "
                 "%s", len(expected), "; ".join(d.describe() for d in expected[:3])
                 + (f"; and {len(expected) - 3} more" if len(expected) > 3 else ""))
    return TranslationResult(decisions, copies)


def copied_back(spec: MigrationSpec, source: Cluster, store: MigrationStateStore,
                state: Mapping | None = None) -> dict[tuple[str, int], PartitionCopy]:
    """What rollbacks copied back, per destination partition (empty when none ran): the copy-back's syncs
    (destination offset -> source offset) as its progress covers them (``state.rollback``).

    ``store``: the destination's state (``state``: already read); a copy-back it records whose progress or syncs
    the source does not show fails loudly (``CopyBackNotVisible``) instead of deciding as if none ran."""
    progress = copy_back_progress(spec, source, store, state)
    if not progress:
        return {}
    topic = offset_syncs_topic(spec.source.alias)
    syncs = read_offset_syncs(source, topic)
    if not syncs:
        refuse_unseen_copy_back(source, store, topic, "offset syncs",
                                recorded_copy_back(store, state)["records_copied"], "record(s) copied")
    return {k: partition_copy(p, syncs.get(k, ())) for k, p in progress.items()}


def checkpoint_translations(spec: MigrationSpec, destination: KafkaCluster,
                            decisions: Iterable[OffsetDecision]) -> int:
    """One MM2 checkpoint per translated decision (destination-side topic name); returns how many."""
    checkpoints = [Checkpoint(d.group, d.destination_topic, d.partition, d.upstream_offset, d.downstream_offset,
                              d.metadata) for d in decisions if d.downstream_offset is not None]
    written = write_checkpoints(spec, destination, checkpoints)
    log.info("wrote %d checkpoints", written)
    return written


def export_offset_map(spec: MigrationSpec, copies: Iterable[PartitionCopy],
                      out_dir: str | Path | StoragePath | None = None) -> tuple[StoragePath, StoragePath]:
    """JSON + CSV offset map under ``<work dir>/offset-map`` (or ``out_dir``)."""
    paths = write_offset_map(spec.name, copies, out_dir or default_work_dir(spec) / "offset-map")
    log.info("offset map written to %s and %s", *paths)
    return paths
