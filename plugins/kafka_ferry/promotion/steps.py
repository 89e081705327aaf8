"""The promotion steps, each idempotent and recorded in the migration state, so a killed run resumes.

    final_copy -> final_translation -> commit_offsets -> reconcile -> switch_timestamps -> mark_promoted

``PROMOTION_TABLE`` (bottom) declares them (names ``core.cutover.step_names.PromotionStep``, the DAG task of each);
``promotion.step_runner`` runs it, and refuses a step whose earlier steps are not recorded done.

Why record each step: a promotion runs inside the cutover window; a retry must not redo finished work
nor redo it differently. ``final_translation`` stores its decisions per group (kind "promotion", key
``translation/<group>``); ``commit_offsets`` and ``GroupOffsetsSyncedSensor`` use exactly those. A step is
marked done only after its effects are durable; a step that fails (a reconciliation mismatch, an active
destination group) leaves no mark and stops the run, so the next run starts there.
``switch_timestamps`` gives each mirror the timestamp type and limits its recorded plan wants from
promotion on (LogAppendTime back, limits restored): only after the final copy, so no copied record gets
the destination broker's time, and before the mark, so a promoted migration never has a CreateTime mirror
of a LogAppendTime topic.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kafka_ferry.copy.catch_up import NotCaughtUp, RunPlan, copy_until, spark_connect_engine, threads_engine
from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.cutover.step_names import PromotionStep
from kafka_ferry.core.cutover.step_table import Step, StepOutcome, StepTable
from kafka_ferry.core.offsets.groups_ahead import refuse_groups_ahead
from kafka_ferry.core.provisioning.time_fidelity import LOG_APPEND_TIME, TIMESTAMP_TYPE, TopicTimePlan
from kafka_ferry.core.schemas.decode_faults import MigrationFaultsFound, blocking
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.promotion.commit import commit_translated_offsets
from kafka_ferry.promotion.promotion_report import build_report, write_report
from kafka_ferry.promotion.readiness import nothing_to_copy, replication_lag
from kafka_ferry.promotion.reconcile import reconcile
from kafka_ferry.promotion.rollback import RollbackRunner
from kafka_ferry.promotion.step_runner import run_table
from kafka_ferry.provision.fences import lift_all_fences
from kafka_ferry.state.decode_marks import decode_marks
from kafka_ferry.state.offset_decisions import expected_group_offsets, stored_decisions  # noqa: F401 (public here too)
from kafka_ferry.state.progress import migrated_groups, read_progress
from kafka_ferry.state.promotion import (
    PROMOTED,
    completed_steps,
    promotion_records,
    save_final_translation,
    save_promoted,
    save_step_done,
)
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.state.time_plans import save_time_plan_records, time_plan_records
from kafka_ferry.storage.workdir import as_path
from kafka_ferry.translation.translate import (
    checkpoint_translations,
    default_work_dir,
    export_offset_map,
    translate_migration,
)

log = logging.getLogger(__name__)

FinalCopy = Callable[[MigrationSpec, KafkaCluster, KafkaCluster, MigrationStateStore], dict]


class FinalCopyIncomplete(Retryable, RuntimeError):
    """The final copy did not bring every partition to lag 0 (producers still running?)."""


def copy_until_caught_up(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                         store: MigrationStateStore, run_plan: RunPlan, max_batches: int = 100) -> dict:
    """The copy stage's batches until nothing is left, under the lease a catch-up copy job takes."""
    try:
        return copy_until(spec, source, destination, store, run_plan, "final-copy", max_batches=max_batches)
    except NotCaughtUp:
        raise FinalCopyIncomplete(f"still records to copy after {max_batches} batches: is the source quiesced?"
                                  ) from None


def in_process_final_copy(spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                          store: MigrationStateStore, max_batches: int = 100, workers: int = 16) -> dict:
    """The final copy in this task, without Spark, for a spark-submit engine: a JVM start (seconds) would sit
    inside the cutover window."""
    return copy_until_caught_up(spec, source, destination, store, threads_engine(workers), max_batches)


def spark_connect_final_copy(url: str, package_zip: Path) -> FinalCopy:
    """The final copy on the catch-up batches' engine when that is a running Spark Connect server."""
    engine = spark_connect_engine(url, package_zip)
    return lambda spec, source, destination, store: copy_until_caught_up(spec, source, destination, store, engine)


class PromotionRunner:
    """Runs the promotion steps for one migration; ``after_step`` is a test seam (e.g. to kill the run)."""

    def __init__(self, spec: MigrationSpec, source: KafkaCluster, destination: KafkaCluster,
                 store: MigrationStateStore | None = None, work_dir: str | Path | None = None,
                 allow_rewind: bool = False, final_copy: FinalCopy | None = None,
                 after_step: Callable[[str], None] | None = None) -> None:
        self.spec, self.source, self.destination = spec, source, destination
        self.store = store or MigrationStateStore(destination, spec.state_topic_name)
        self.work_dir = as_path(work_dir) if work_dir else default_work_dir(spec)
        self.allow_rewind = allow_rewind
        self.final_copy = final_copy or in_process_final_copy
        self.after_step = after_step
        self._reconciliation: dict | None = None
        self._copies: dict | None = None  # the final translation's partition copies, for this run's reconcile
        self._topics: list[str] | None = None

    # --- state ------------------------------------------------------------------------------
    def _state(self) -> dict[str, dict]:
        return promotion_records(self.store)

    def completed_steps(self) -> list[str]:
        return completed_steps(self._state(), STEPS)

    def _record(self, outcome: StepOutcome) -> None:
        """The promotion's step record (``PROMOTION_TABLE``'s recorder): marked done only after its effects are
        durable (the step returned)."""
        save_step_done(self.store, outcome.step, dict(outcome.summary or {}), outcome.duration_s)

    # --- run --------------------------------------------------------------------------------
    def run(self, steps: Sequence[str] | None = None, before_change: Callable[[], object] | None = None,
            rollback_plan: bool = True) -> dict:
        """Run the given steps (all by default; in table order), skipping those already done; returns the report.
        A step whose earlier steps are not done is refused before anything runs (``core.cutover.step_table``).
        ``before_change``: called after the last refusal, before the first change (``run_table``).

        ``rollback_plan``: a promoted report carries the way back (``add_rollback_plan``). False leaves it to the
        caller, to decide after the run: the plan is for the people who sign the cutover off, not part of it, and
        at 2,000 partitions it took a third of the promotion's time (the DAG's task adds it after the mark)."""
        started = time.monotonic()
        done = self.completed_steps()
        plan = PROMOTION_TABLE.plan(done, steps)
        standing = blocking(decode_marks(self.store)) if PromotionStep.MARK_PROMOTED not in done else []
        if standing:
            raise MigrationFaultsFound(
                f"promotion of {self.spec.name!r} refused: copied records decode on the source but not on the "
                "destination (the decode check's last run found them; migrate the schemas they need and run a "
                "catch-up batch): " + "; ".join(standing[:5]))
        timings = run_table(PROMOTION_TABLE, self, done, f"promotion {self.spec.name}", after_step=self.after_step,
                            plan=plan, before_change=before_change)
        report = build_report(self.spec, self._state(), timings, self._reconciliation,
                              time.monotonic() - started, time_plan_records(self.store),
                              decode_marks(self.store))
        report["report_path"] = str(write_report(report, self.work_dir))
        return self.add_rollback_plan(report) if rollback_plan else report

    def add_rollback_plan(self, report: dict) -> dict:
        """``report`` with the rollback plan of a promoted migration, written again to its file; called after the
        mark (consumers may start on the destination meanwhile: the plan changes nothing and the rollback decides
        again from the clusters, so it is exact whenever it runs). Any other status: unchanged."""
        if report.get("status") != PROMOTED:
            return report
        report["rollback_plan"] = self._rollback_plan()
        report["report_path"] = str(write_report({k: v for k, v in report.items() if k != "report_path"},
                                                 self.work_dir, logged=False))
        return report

    # --- steps ------------------------------------------------------------------------------
    def _step_final_copy(self) -> dict:
        if nothing_to_copy(self.source, self.store, self._source_topics()):  # the last catch-up copied it all
            log.info("promotion %s: final copy: the copy is at the source's end on every partition, no batch run",
                     self.spec.name)
            return {"batches": 0, "records_copied": 0, "max_lag": 0, "nothing_new": True}
        summary = self.final_copy(self.spec, self.source, self.destination, self.store)
        lag = replication_lag(self.source, self.store, self._source_topics())
        if lag["max_lag"] > 0:
            raise FinalCopyIncomplete(f"lag after the final copy is {lag['max_lag']} on {lag['worst']}")
        return {**summary, "max_lag": lag["max_lag"]}

    def _step_final_translation(self) -> dict:
        result = translate_migration(self.spec, self.source, self.destination, self.store)
        self._copies = dict(result.copies)
        checkpoints = checkpoint_translations(self.spec, self.destination, result.decisions)
        json_path, _ = export_offset_map(self.spec, result.copies.values(), self.work_dir / "offset-map")
        by_group: dict[str, list[dict]] = {}
        for d in result.decisions:
            by_group.setdefault(d.group, []).append(d.as_dict())
        save_final_translation(self.store, by_group, self._state())
        return {**result.summary(), "checkpoints": checkpoints, "offset_map": str(json_path)}

    def _step_commit_offsets(self) -> dict:
        decisions = stored_decisions(self._state())
        if not self.allow_rewind:  # a group ahead would hold the synced gate for its whole timeout: refuse now
            expected = expected_group_offsets(decisions)
            refuse_groups_ahead(self.spec.name, expected, self.destination.groups_offsets(expected))
        outcomes = commit_translated_offsets(self.destination, decisions, allow_rewind=self.allow_rewind, strict=True)
        # counts, not every partition: the summary is kept in the state topic and logged (2,000 partitions were a
        # record and a log line of 100 KB); each partition's outcome is in the commit's debug log
        return {"groups": len(outcomes), "committed": sum(len(o.committed) for o in outcomes),
                "skipped": sum(len(o.skipped) for o in outcomes),
                "skipped_groups": sum(1 for o in outcomes if o.skipped)}

    def _step_reconcile(self) -> dict:
        report = reconcile(self.spec, self.source, self.destination, self.store, self._copies_since_translation())
        self._reconciliation = report.as_dict()
        if not report.ok:
            write_report(build_report(self.spec, self._state(), {}, self._reconciliation, 0.0), self.work_dir)
        report.raise_if_mismatched()
        return {k: v for k, v in self._reconciliation.items() if k != "partitions"}

    def _copies_since_translation(self) -> dict | None:
        """The partition copies the final translation loaded in this run (after the final copy: the copy is at
        the source's end and nothing copies until the mark), one for each partition with progress; None when this
        run did not translate (a resumed run, the DAG's next task), the progress moved since, or a mirror's end
        did (a record written on the destination since: one batched read): then the reconciliation loads them
        itself, so it still sees every record the destination holds. Saves the cutover a second round of reads."""
        if self._copies is None:
            return None
        progress = read_progress(self.store)
        if any(key not in self._copies or self._copies[key].copied_upstream_end != p.next_upstream_offset
               for key, p in progress.items()):  # something copied since: read again
            return None
        copies = {key: self._copies[key] for key in progress}
        ends = self.destination.list_offsets([(c.destination_topic, c.partition) for c in copies.values()], "latest")
        if any(ends[(c.destination_topic, c.partition)] != c.downstream_end for c in copies.values()):
            return None
        return copies

    def _step_switch_timestamps(self) -> dict:
        """Set each mirror's timestamp configs for after promotion; setting them again is harmless (resume)."""
        plans = time_plan_records(self.store)
        now = int(time.time() * 1000)
        switched, to_log_append_time, configs = {}, 0, {}
        for topic in self._source_topics():
            if topic not in plans or plans[topic].get("status") == "switched":
                continue
            plan = TopicTimePlan.from_record(plans[topic])
            configs[plan.destination_topic] = plan.at_promotion
            to_log_append_time += plan.at_promotion.get(TIMESTAMP_TYPE) == LOG_APPEND_TIME
            switched[topic] = {**plans[topic], "status": "switched", "switched_at_ms": now}
        self.destination.set_topics_configs(configs)  # one request for every mirror, not one per topic
        for destination_topic, at_promotion in configs.items():
            log.info("promotion %s: %s timestamp configs now %s", self.spec.name, destination_topic,
                     at_promotion or "unchanged")
        save_time_plan_records(self.store, switched)
        return {"topics": len(switched), "switched_to_log_append_time": to_log_append_time}

    def _step_mark_promoted(self) -> dict:
        groups = migrated_groups(self.store)
        topics = self._source_topics()
        now = int(time.time() * 1000)
        lifted = lift_all_fences(self.destination, self.store)  # before the mark: consumers may start after it
        save_promoted(self.store, {t: self.spec.topics.rename.destination_topic(t) for t in topics}, groups, now)
        return {"topics": len(topics), "groups": len(groups), **({"fences_lifted": len(lifted)} if lifted else {})}

    def _rollback_plan(self) -> dict:
        """What a rollback would copy back and where each group would resume (``promotion.rollback``); the report
        carries it, so the cutover is signed off knowing the way back. Reading it must not fail a promotion that is
        done: a failure is reported in its place."""
        try:
            return RollbackRunner(self.spec, self.source, self.destination, self.store, self.work_dir).plan()
        except Exception as exc:  # noqa: BLE001 - reported, the promotion itself succeeded
            log.warning("promotion %s: rollback plan not available: %s", self.spec.name, exc)
            return {"error": f"rollback plan not available: {exc}"}

    def _source_topics(self) -> list[str]:
        """The migration's topics on the source, listed once per runner: every step of one promotion run works on
        the same topics (and the source's metadata is the whole cluster's: a round trip to list it, each time)."""
        from kafka_ferry.core.provisioning.provisioning_plan import select_topics

        if self._topics is None:
            self._topics = select_topics(self.spec, self.source.list_topic_names())
        return list(self._topics)


# The promotion, in order. Each step is idempotent and marked done (kind "promotion", key ``step/<name>``: finished
# when, how long, its summary) only after its effects are durable (see the module docstring), so a run resumes at the
# first unmarked step. ``task``: the DAG task that runs it (``dag_promotion.add_promotion_tasks`` builds one task per
# name, in this order, with the gates between them).
PROMOTION_TABLE: StepTable[PromotionRunner] = StepTable("promotion", PromotionStep, (
    Step(PromotionStep.FINAL_COPY, PromotionRunner._step_final_copy,
         "the copy's batches and the lag after them (0)", "promote_final_copy"),
    Step(PromotionStep.FINAL_TRANSLATION, PromotionRunner._step_final_translation,
         "each group's final decisions (key translation/<group>), the checkpoints and the offset map",
         "promote_translate_commit"),
    Step(PromotionStep.COMMIT_OFFSETS, PromotionRunner._step_commit_offsets,
         "the groups and offsets committed on the destination", "promote_translate_commit"),
    Step(PromotionStep.RECONCILE, PromotionRunner._step_reconcile,
         "the partitions and records compared (count and digest)", "promote_reconcile_mark"),
    Step(PromotionStep.SWITCH_TIMESTAMPS, PromotionRunner._step_switch_timestamps,
         "each mirror's timestamp plan, status switched (kind timestamps)", "promote_reconcile_mark"),
    Step(PromotionStep.MARK_PROMOTED, PromotionRunner._step_mark_promoted,
         "the promoted mark with its topics and groups, the fences lifted", "promote_reconcile_mark"),
), PromotionRunner._record)
STEPS = PROMOTION_TABLE.order
