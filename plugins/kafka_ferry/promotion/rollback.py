"""Roll a promoted migration back to the source, exactly; each step idempotent and recorded, so a killed run resumes.

    quiesce -> copy_back -> commit_offsets -> fences -> reconcile -> mark_rolled_back

(``ROLLBACK_TABLE`` at the bottom, names ``core.cutover.step_names.RollbackStep``, run by ``promotion.step_runner``.)

- ``quiesce``: the destination's mirror topics keep their end offsets for the quiesce window and no migrated group
  has members there (a record produced or an offset committed after this would be left behind).
- ``copy_back``: the partition copier with the roles swapped (destination -> source, same partition): every record
  after the cutover that does not carry this migration's provenance, with the copier's fidelity (key, value,
  headers, timestamp, read_committed: aborted transactions never copied) and exactly-once resume, stamped with the
  destination's provenance (so a later forward catch-up never copies it again) and its own sync log and progress
  (``state.rollback``). In schema remap mode the copy-back maps schema ids back (``promotion.rollback_schema_ids``):
  the serialized fields of each topic (the forward copy's decisions) get the source id the forward map sent to their
  destination id; a record carrying a destination id the forward map never knew refuses the rollback before the
  first record is copied.
- ``commit_offsets``: each migrated group's destination offsets translated to exact source offsets
  (``core.cutover.rollback_plan.resume_on_source``: the forward map before the cutover, the reverse syncs after), stored
  first, then committed on the source while the group has no members there.
- ``fences``: with ``acls.fence`` the destination's groups and mirror topics are fenced again (the migration never
  put anything on the source, so nothing is lifted there).
- ``reconcile``: per partition the copied-back records on the source against the destination's post-cutover ones
  (count and order-sensitive digest of key, value, user headers, timestamp).
- ``mark_rolled_back``: the promotion's records are cleared (copy runs may go on, a later ``promote`` runs every
  step again), and so are those of groups and topics a staged cutover promoted before it (they went back too), and
  the rollback recorded. A second rollback finds it and changes nothing.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path

from kafka_ferry.copy.destination_tail import copied_pairs
from kafka_ferry.copy.plan import PartitionTask
from kafka_ferry.copy.planning import build_copy_back_plan
from kafka_ferry.copy.runner import copy_group
from kafka_ferry.core.common.failures import Permanent, Retryable
from kafka_ferry.core.cutover.rollback_plan import CopyBackRange, copy_back_range, resume_on_source
from kafka_ferry.core.cutover.step_names import RollbackStep
from kafka_ferry.core.cutover.step_table import Step, StepOutcome, StepTable
from kafka_ferry.core.offsets.mm2_wire import offset_syncs_topic
from kafka_ferry.core.offsets.offset_decisions import PartitionCopy
from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.reads import consumed_headers, consumed_partition, read_ranges
from kafka_ferry.promotion.digest import PartitionDigest
from kafka_ferry.promotion.guard import PROMOTED, promotion_status, reset_promotion
from kafka_ferry.promotion.readiness import active_groups
from kafka_ferry.promotion.rollback_rights import check_rollback_rights, plan_acls
from kafka_ferry.promotion.rollback_schema_ids import SchemaIdsBack, VersionsOfId
from kafka_ferry.promotion.step_runner import run_table
from kafka_ferry.provision.fences import put_fences
from kafka_ferry.state import rollback as rb
from kafka_ferry.state.progress import migrated_groups, read_progress
from kafka_ferry.state.staged_cutover import promoted_groups, promoted_topics, reset_staged_promotions
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.storage.workdir import StoragePath, as_path, write_text
from kafka_ferry.translation.translate import copied_back, default_work_dir, load_partition_copies

log = logging.getLogger(__name__)


class RollbackRefused(Permanent, RuntimeError):
    """No retry can heal it: the migration (or unit) is not promoted, a group reading a topic that stays promoted,
    a schema id the forward map never knew. The message names the object and the cause; nothing was changed."""


class DestinationNotQuiet(Retryable, RuntimeError):
    """Producers or consumers still use the destination; a later try may find it quiet."""


class SourceGroupBusy(Retryable, RuntimeError):
    """A group to commit has members on the source (its consumers started early); a later try may find it empty."""


class RollbackMismatch(Permanent, RuntimeError):
    """What was copied back differs from what the destination holds; the message names the partitions."""


def group_resumes(destination: KafkaCluster, group: str, topics: Sequence[str],
                  forward: Mapping[tuple[str, int], PartitionCopy], reverse: Mapping[tuple[str, int], PartitionCopy],
                  predicted: Mapping[tuple[str, int], list[tuple[int, int]]] | None = None,
                  committed: Mapping[tuple[str, int], tuple[int, str]] | None = None) -> list[dict]:
    """Where ``group`` resumes on the source, per partition it committed on the destination: the forward map and the
    copy-back's syncs (``predicted``: those of a copy-back not run yet) decide it (``resume_on_source``).
    ``committed``: the group's destination (offset, metadata), when read already (many groups are read together)."""
    by_dest = {(c.destination_topic, c.partition): c for c in forward.values()}
    rows = []
    if committed is None:
        committed = destination.group_offsets_with_metadata(group)
    for (dtopic, q), (offset, metadata) in sorted(committed.items()):
        fwd = by_dest.get((dtopic, q))
        if fwd is None or fwd.source_topic not in topics:
            continue
        back = reverse.get((dtopic, q))
        back_syncs: list[tuple[int, int]] = list(back.offset_map.syncs if back else ())
        back_syncs += (predicted or {}).get((dtopic, q), [])
        end = max([fwd.copied_upstream_end] + [s[1] + 1 for s in back_syncs[-1:]])
        r = resume_on_source(fwd.offset_map.syncs, back_syncs, offset, end)
        rows.append({"source_topic": fwd.source_topic, "partition": q, "destination_topic": dtopic,
                     "destination_offset": offset, "source_offset": r.to_offset, "method": r.method,
                     "reason": r.reason, "metadata": metadata})
    return rows


def commit_on_source(source: KafkaCluster, group: str, rows: Sequence[dict]) -> int:
    """Commit the decided offsets of ``group`` on the source, only while it has no members there."""
    busy = active_groups(source, [group])
    if busy:
        raise SourceGroupBusy(f"group {group} has {busy[group]} on the source: its offsets are committed only "
                              "while it is empty; stop its source consumers, then retry")
    if rows:
        source.alter_group_offsets(group, {(r["source_topic"], r["partition"]): r["source_offset"] for r in rows},
                                   {(r["source_topic"], r["partition"]): r["metadata"] for r in rows})
    for r in rows:
        log.info("rollback: group %s %s-%d -> %d (%s)", group, r["source_topic"], r["partition"], r["source_offset"],
                 r["reason"])
    return len(rows)


class RollbackRunner:
    """Runs the rollback steps for one migration; ``after_step`` is a test seam (e.g. to kill the run)."""

    def __init__(self, spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                 store: MigrationStateStore | None = None, work_dir: str | Path | StoragePath | None = None,
                 quiesce_window_s: float = 5.0, after_step: Callable[[str], None] | None = None,
                 versions_of_id: VersionsOfId | None = None) -> None:
        self.spec, self.source, self.destination = spec, source, destination
        self.store = store or MigrationStateStore(destination, spec.state_topic_name)
        self.versions_of_id = versions_of_id  # the destination registry's, to name an unmapped id (optional)
        self.work_dir = as_path(work_dir) if work_dir else default_work_dir(spec)  # local or object storage
        self.quiesce_window_s = quiesce_window_s
        self.after_step = after_step
        self.promoted_at_ms: int | None = None

    # --- what is being rolled back --------------------------------------------------------
    @cached_property
    def schema_ids(self) -> SchemaIdsBack | None:
        """Remap mode: the forward id map turned around (read once); None copies keys and values back byte for byte."""
        return SchemaIdsBack.of(self.spec, self.store, self.versions_of_id, self.rolled_back())

    def rolled_back(self) -> str:
        """What this runner rolls back, as its messages name it."""
        return repr(self.spec.name)

    def _promoted_at(self) -> int | None:
        status = promotion_status(self.store)
        if status and status.get("status") == PROMOTED:
            return status.get("promoted_at_ms")
        done = rb.rollback_status(self.store)
        if done and done.get("status") == rb.ROLLED_BACK:
            return done.get("promoted_at_ms")
        raise RollbackRefused(self.not_promoted_message())

    def is_promoted(self) -> bool:
        """Promoted as a whole now (not rolled back already): a whole rollback has work to do."""
        status = promotion_status(self.store)
        return bool(status and status.get("status") == PROMOTED)

    def check_promoted(self) -> int | None:
        """When the last promotion was (the rollback's promotion, rolled back already); refuses, as the rollback
        itself does, a migration that is not promoted as a whole: the dry run says what the run would say."""
        return self._promoted_at()

    def not_promoted_message(self) -> str:
        """Why a whole rollback has nothing to do; with a staged cutover, which units are promoted and how each
        goes back (the form's *Groups* / *Topics* field, ``kafka-ferry rollback --groups / --topics``)."""
        state = self.store.read_all()
        groups, topics = promoted_groups(self.store, state), promoted_topics(self.store, state)
        if not (groups or topics):
            return (f"migration {self.spec.name!r} is not promoted: nothing to roll back (state topic "
                    f"{self.store.topic})")
        staged = "; ".join(
            [f"promoted topic(s) {', '.join(topics)}: roll them back (with the groups reading them) with the "
             f"form's *Topics* field (kafka-ferry rollback --topics {' '.join(topics)})"] * bool(topics)
            + [f"promoted group(s) {', '.join(groups)}: roll them back with the form's *Groups* field "
               f"(kafka-ferry rollback --groups {' '.join(groups)})"] * bool(groups))
        return (f"migration {self.spec.name!r} is not promoted as a whole (state topic {self.store.topic}): a "
                f"whole rollback has nothing to roll back, but a staged cutover promoted units of it: {staged}")

    def run(self, steps: Sequence[str] | None = None, before_change: Callable[[], object] | None = None) -> dict:
        """Run the steps (all by default), skipping those done for this promotion; returns the report.
        ``before_change``: called after the last refusal, before the first change (``run_table``)."""
        promoted_at = self.promoted_at_ms = self._promoted_at()
        done = rb.steps_done(self.store, promoted_at)
        plan = ROLLBACK_TABLE.plan(done, steps)
        if plan.to_run:  # before any change: the source principal's rights for the steps still to run, named if missing
            check_rollback_rights(self.spec, self.source, f"rollback of {self.spec.name!r}",
                                  *self.source_scope(copy_back=RollbackStep.COPY_BACK in plan.to_run,
                                                     commit=RollbackStep.COMMIT_OFFSETS in plan.to_run))
        this_run = run_table(ROLLBACK_TABLE, self, done, f"rollback {self.spec.name}", after_step=self.after_step,
                             plan=plan, before_change=before_change)
        status = rb.rollback_status(self.store)
        report = {"migration": self.spec.name, "promoted_at_ms": promoted_at,
                  "status": status["status"] if status and status.get("promoted_at_ms") == promoted_at
                  else "in-progress", "this_run": this_run, "groups": rb.stored_resumes(self.store)}
        path = write_text(self.work_dir / "rollback-report.json", json.dumps(report, indent=1, sort_keys=True))
        report["report_path"] = str(path)
        return report

    def _record(self, outcome: StepOutcome) -> None:
        """The rollback's step record (``ROLLBACK_TABLE``'s recorder): done for this promotion only."""
        rb.save_step(self.store, outcome.step, self.promoted_at_ms, outcome.summary or {}, outcome.finished_at_ms)

    # --- the plan (also a dry run) -----------------------------------------------------------
    def source_scope(self, copy_back: bool = True, commit: bool = True) -> tuple[list[str], list[str]]:
        """The source topics the copy-back writes and the groups committed on the source (``rollback_acls``)."""
        topics = sorted({t for t, _ in read_progress(self.store)}) if copy_back else []
        return topics, sorted(migrated_groups(self.store)) if commit else []

    def forward_copies(self) -> dict[tuple[str, int], PartitionCopy]:
        return load_partition_copies(self.spec, self.source, self.destination, read_progress(self.store))

    def reverse_copies(self) -> dict[tuple[str, int], PartitionCopy]:
        return copied_back(self.spec, self.source, self.store)

    def copy_back_ranges(self) -> list[CopyBackRange]:
        forward = read_progress(self.store)
        reverse = rb.copy_back_progress(self.spec, self.source, self.store)
        parts = [(p.destination_topic, q) for (_, q), p in sorted(forward.items())]
        starts = self.destination.list_offsets(parts, "earliest")
        ends = self.destination.list_offsets(parts, "latest", read_committed=True)
        ranges = []
        for (topic, q), p in sorted(forward.items()):
            d = (p.destination_topic, q)
            back = reverse.get(d)
            ranges.append(copy_back_range(d[0], q, topic, forward_last_downstream=p.last_downstream_offset,
                                          reverse_next=back.next_upstream_offset if back else None,
                                          log_start=starts[d], stable_end=ends[d]))
        return ranges

    # --- steps ------------------------------------------------------------------------------
    def _mirror_partitions(self) -> list[tuple[str, int]]:
        return sorted((p.destination_topic, q) for (_, q), p in read_progress(self.store).items())

    def _step_quiesce(self) -> dict:
        return self.quiesce_on(self._mirror_partitions(), sorted(migrated_groups(self.store)),
                               f"rollback of {self.spec.name!r}")

    def quiesce_on(self, parts: Sequence[tuple[str, int]], groups: Sequence[str], what: str) -> dict:
        """``parts``' destination end offsets unchanged through the quiesce window and no group of ``groups`` with
        members there; else ``DestinationNotQuiet`` (a later try may find it quiet) naming what moved."""
        before = self.destination.list_offsets(parts, "latest", read_committed=False)
        time.sleep(self.quiesce_window_s)  # the window itself: producers that stopped stay stopped through it
        after = self.destination.list_offsets(parts, "latest", read_committed=False)
        moved = sorted(f"{t}-{p}" for t, p in parts if before[(t, p)] != after[(t, p)])
        active = active_groups(self.destination, groups)
        if moved or active:
            raise DestinationNotQuiet(
                f"{what}: the destination is not quiet: "
                + (f"end offsets of {', '.join(moved[:10])} moved within {self.quiesce_window_s} s (stop the "
                   "producers); " if moved else "")
                + "; ".join(f"group {g} has {why} on the destination (stop its consumers)"
                            for g, why in sorted(active.items())))
        return {"partitions": len(parts), "groups": len(groups), "window_s": self.quiesce_window_s}

    def _step_copy_back(self) -> dict:
        ranges = [r for r in self.copy_back_ranges() if r.offsets]
        for r in ranges:
            log.info("rollback %s: copy back %s-%d [%d, %d): %s", self.spec.name, r.destination_topic, r.partition,
                     r.start, r.end, r.reason)
        if not ranges:
            return {"partitions": 0, "records_copied": 0}
        remap: dict = {}
        if self.schema_ids is not None:
            self.refuse_unmapped_ids(ranges)
            remap = self.schema_ids.plan_fields([r.destination_topic for r in ranges])
        # where each source partition's history ends for the copy-back: the last source offset the forward copy read
        forward_read = {(t, q): p.last_upstream_offset for (t, q), p in read_progress(self.store).items()}
        rf = min(3, self.source.describe_cluster().broker_count)
        rb.copy_back_store(self.spec, self.source).ensure_topic()
        syncs_topic = offset_syncs_topic(self.spec.source.alias)
        self.source.create_topic(syncs_topic, 1, rf, {"cleanup.policy": "compact"})
        plan = build_copy_back_plan(
            self.spec, [PartitionTask(r.destination_topic, r.partition, r.source_topic, r.start, r.end,
                                      resume_after=forward_read.get((r.source_topic, r.partition))) for r in ranges],
            self.destination.describe_cluster().cluster_id, self.source.describe_cluster().cluster_id, remap)
        configs = {"source": self.destination.client_config, "destination": self.source.client_config}
        rows = copy_group(plan, plan.tasks, configs)
        return {"partitions": len(rows), "records_copied": sum(r.get("records_copied", 0) for r in rows),
                "records_skipped_forward_copies": sum(r.get("records_skipped_loop", 0) for r in rows),
                **({"schema_ids": f"mapped back in {remap['serialized_fields']} ({len(remap['schema_id_map'])} "
                                  "id(s) in the map)"} if remap else {})}

    def plan(self) -> dict:
        """What a rollback would do now, changing nothing (a dry run; the promotion report carries it): per
        destination partition the range and the records it would copy back, and where each group would resume.

        The copy-back appends at the source's end in destination order, so the records it would copy (those without
        this migration's provenance, read here) and the source's end give its sync log in advance, and the resume
        points are decided from it exactly as the real step decides them from the written one. Records a killed
        copy-back already wrote past its progress count as copied where they are, as its resume finds them."""
        ranges = self.copy_back_ranges()
        tails = self._copied_past_progress(ranges)
        wanted = {(r.destination_topic, r.partition): (r.start, r.end) for r in ranges if r.offsets}
        pending: dict[tuple[str, int], list[int]] = {}

        def scan():
            """Each record of the ranges once, noting the offsets still to copy; passed on (not kept: the
            post-cutover records may be many) to the schema plan, which keeps a row per unknown id."""
            for topic, q, offset, key, value in self._copied_back_records(wanted):
                tail = tails.get((topic, q))
                if not tail or offset > tail[-1][0]:
                    pending.setdefault((topic, q), []).append(offset)
                yield topic, q, offset, key, value

        # the step's refusal scans the whole range, copied tail included: so does the plan's schema section
        schema_section = self.schema_ids.plan(scan()) if self.schema_ids is not None else None
        if schema_section is None:
            for _ in scan():
                pass
        source_ends = self.source.list_offsets([(r.source_topic, r.partition) for r in ranges], "latest",
                                               read_committed=False)
        predicted = {}
        for r in ranges:
            key, end = (r.destination_topic, r.partition), source_ends[(r.source_topic, r.partition)]
            predicted[key] = tails.get(key, []) + [(d, end + i) for i, d in enumerate(pending.get(key, []))]
        return {"migration": self.spec.name, "copy_back": [{
                    **r.as_dict(), "records": len(pending.get((r.destination_topic, r.partition), [])),
                    "copied_by_an_interrupted_run": len(tails.get((r.destination_topic, r.partition), []))}
                    for r in ranges],
                "records": sum(len(v) for v in pending.values()), "groups": self.resume_plan(predicted),
                "acls": plan_acls(self.spec, self.source, *self.source_scope()),
                **({"schema_ids": schema_section} if schema_section is not None else {})}

    def refuse_unmapped_ids(self, ranges: Sequence[CopyBackRange] | None = None) -> None:
        """Remap mode, before the first record goes back: every id the copy-back of ``ranges`` (default: this
        runner's) would meet must map back; refuses naming them (``SchemaIdsNotMappedBack``). Reads only."""
        if self.schema_ids is None:
            return
        ranges = self.copy_back_ranges() if ranges is None else ranges
        wanted = {(r.destination_topic, r.partition): (r.start, r.end) for r in ranges if r.offsets}
        if wanted:
            self.schema_ids.refuse_unmapped(self._copied_back_records(wanted))

    def _copied_past_progress(self, ranges: Sequence[CopyBackRange]) -> dict[tuple[str, int], list[tuple[int, int]]]:
        """(destination offset, source offset) of the records a killed copy-back wrote to the source past its
        progress, per destination partition (found by provenance, as the copier's resume finds them:
        ``copy.destination_tail``). Read after the copy-back's progress, and never before the last forward-copied
        source record: a copy-back appends after the cutover, the source's history before it is not read."""
        reverse = rb.copy_back_progress(self.spec, self.source, self.store)
        forward = {(p.destination_topic, q): p for (_, q), p in read_progress(self.store).items()}
        destination_id = self.destination.describe_cluster().cluster_id
        # every partition's end in one request (copied_pairs would ask one partition at a time)
        ends = self.source.list_offsets([(r.source_topic, r.partition) for r in ranges], "latest",
                                        read_committed=False)
        tails = {}
        for r in ranges:
            key = (r.destination_topic, r.partition)
            back, fwd = reverse.get(key), forward.get(key)
            known = (back.last_downstream_offset if back else None, fwd.last_upstream_offset if fwd else None)
            after = max((o for o in known if o is not None), default=None)  # source offsets, both
            pairs = copied_pairs(self.source, r.source_topic, r.partition, after, destination_id,
                                 end=ends[(r.source_topic, r.partition)])
            if pairs:
                tails[key] = pairs
        return tails

    def _copied_back_records(self, wanted: Mapping[tuple[str, int], tuple[int, int]]):
        """(topic, partition, offset, key, value) of the records in ``wanted`` the copy-back would copy: those
        without this migration's provenance (forward copies stay where they are)."""
        source_id = self.source.describe_cluster().cluster_id
        for msg in read_ranges(self.destination, wanted):
            if read_provenance(consumed_headers(msg))[0] != source_id:
                yield msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()

    def resume_plan(self, predicted: dict[tuple[str, int], list[tuple[int, int]]] | None = None
                    ) -> dict[str, list[dict]]:
        """Each migrated group's source offsets after the copy-back, decided from both sync logs (changes nothing);
        ``predicted``: reverse syncs a copy-back not run yet would add, per destination partition (``plan``)."""
        forward, reverse = self.forward_copies(), self.reverse_copies()
        groups = migrated_groups(self.store)
        committed = self.destination.groups_offsets_with_metadata(groups)  # together, not one request per group
        return {group: group_resumes(self.destination, group, topics, forward, reverse, predicted, committed[group])
                for group, topics in sorted(groups.items())}

    def _step_commit_offsets(self) -> dict:
        resumes = self.resume_plan()
        rb.save_resumes(self.store, resumes)
        busy = active_groups(self.source, list(resumes))
        if busy:
            raise SourceGroupBusy("; ".join(f"group {g} has {why} on the source: commit only while it is empty"
                                            for g, why in sorted(busy.items())))
        committed = sum(commit_on_source(self.source, group, rows) for group, rows in resumes.items())
        return {"groups": len(resumes), "committed": committed}

    def _step_fences(self) -> dict:
        if not self.spec.acls.fence:
            return {"fences": "off"}
        return {"fenced": sorted(put_fences(self.spec, self.source, self.destination, self.store))}

    def _step_reconcile(self) -> dict:
        reverse = self.reverse_copies()
        dest_id = self.destination.describe_cluster().cluster_id
        source_id = self.source.describe_cluster().cluster_id
        d_ranges, s_ranges = {}, {}
        for (dtopic, q), c in reverse.items():
            if not c.offset_map.syncs:
                continue
            first = c.offset_map.syncs[0]
            d_ranges[(dtopic, q)] = (first.upstream_offset, c.copied_upstream_end)
            s_ranges[(c.destination_topic, q)] = (first.downstream_offset, c.next_downstream_offset)
        digests: dict[tuple[str, str, int], PartitionDigest] = {}
        for side, cluster, ranges in (("d", self.destination, d_ranges), ("s", self.source, s_ranges)):
            for msg in read_ranges(cluster, ranges):
                cluster_of = read_provenance(consumed_headers(msg))[0]
                if (side == "d" and cluster_of == source_id) or (side == "s" and cluster_of != dest_id):
                    continue  # forward copies on the destination; the source's own records
                _, ts = msg.timestamp()
                (topic, partition), key, value = consumed_partition(msg), msg.key(), msg.value()
                if side == "d" and self.schema_ids is not None:  # as the copy-back wrote them: source ids
                    key, value = self.schema_ids.normalise(topic, key, value)
                digests.setdefault((side, topic, partition), PartitionDigest()).add(key, value, msg.headers(), ts)
        bad, records = [], 0
        for (dtopic, q), c in sorted(reverse.items()):
            d = digests.get(("d", dtopic, q), PartitionDigest())
            s = digests.get(("s", c.destination_topic, q), PartitionDigest())
            records += s.count
            if (d.count, d.hexdigest) != (s.count, s.hexdigest):
                bad.append(f"{dtopic}-{q}: {d.count} records after the cutover vs {s.count} copied back to "
                           f"{c.destination_topic}-{q}, digests {'equal' if d.hexdigest == s.hexdigest else 'differ'}")
        if bad:
            raise RollbackMismatch("rollback reconciliation failed: " + "; ".join(bad[:20]))
        return {"partitions_checked": len(reverse), "records_checked": records}

    def _step_mark_rolled_back(self) -> dict:
        status = promotion_status(self.store) or rb.rollback_status(self.store) or {}  # a rerun after the clear
        topics, groups = status.get("topics", []), status.get("groups", [])
        rb.mark_rolled_back(self.store, self.promoted_at_ms, int(time.time() * 1000), topics, groups)
        cleared = reset_promotion(self.store)  # after the mark: a crash between leaves both, the rerun clears
        # a staged cutover before the whole promotion went back with it: its groups and topics are migrated,
        # unpromoted units again (catch-up copies the topics and commits the groups; issue 35's route matrix)
        staged = reset_staged_promotions(self.store)
        return {"promotion_records_cleared": len(cleared),
                "staged_promotions_cleared": sum(len(keys) for keys in staged.values())}


# The rollback, in order; each step recorded done (kind "rollback", key ``step/<name>``, for the promotion it
# undoes) only after its effects are durable, so a killed run resumes at the first unrecorded step. The DAG's
# ``rollback`` task runs it (``mode: rollback``).
ROLLBACK_TABLE: StepTable[RollbackRunner] = StepTable("rollback", RollbackStep, (
    Step(RollbackStep.QUIESCE, RollbackRunner._step_quiesce,
         "the partitions and groups found quiet, and the window", "rollback", reads_only=True),
    Step(RollbackStep.COPY_BACK, RollbackRunner._step_copy_back,
         "the partitions and records copied back (their progress and syncs on the source)", "rollback"),
    Step(RollbackStep.COMMIT_OFFSETS, RollbackRunner._step_commit_offsets,
         "each group's decided source offsets (key resume/<group>), the groups committed", "rollback"),
    Step(RollbackStep.FENCES, RollbackRunner._step_fences, "the fences put again (or fences off)", "rollback"),
    Step(RollbackStep.RECONCILE, RollbackRunner._step_reconcile,
         "the partitions and records compared (count and digest)", "rollback"),
    Step(RollbackStep.MARK_ROLLED_BACK, RollbackRunner._step_mark_rolled_back,
         "the rolled-back mark (key migration); the promotion's and staged units' records cleared", "rollback"),
), RollbackRunner._record)
STEPS = ROLLBACK_TABLE.order
