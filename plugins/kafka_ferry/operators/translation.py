"""Catch-up translation after each copy batch: translate, checkpoint, export the offset map.

Why not commit by default: like MM2's ``sync.group.offsets.enabled`` (off by default), committing to
destination groups during catch-up is opt-in; promotion always commits. Decisions are logged with their
reasons; flagged ones (clamped beyond the copy, not translated) are in the returned summary, and warnings except
the clamps a capped catch-up batch expects (one INFO line per batch: ``translate_migration(catch_up=True)``).
"""

from __future__ import annotations

import json
import time
from typing import Any

from kafka_ferry.airflow_native.announce import translation_measured
from kafka_ferry.copy.plan import planned_files, work_dir
from kafka_ferry.core.common.flags import parse_bool
from kafka_ferry.operators.base import DryRunOperator
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.promotion.commit import commit_translated_offsets
from kafka_ferry.promotion.group_readiness import ready_groups, write_ready_file
from kafka_ferry.reports.publish import publish_batch_run
from kafka_ferry.state.batches import batch_history
from kafka_ferry.state.promotion import promotion_status
from kafka_ferry.state.staged_cutover import without_promoted_groups
from kafka_ferry.storage.workdir import StoragePath
from kafka_ferry.translation.translate import checkpoint_translations, export_offset_map, translate_migration


class TranslateOffsetsOperator(DryRunOperator):
    """Translates every migrated group's source offsets; writes MM2 checkpoints and the offset map.

    :param commit_offsets: also commit the translated offsets to the destination groups (promoted groups are left to
        their consumers); a bool or a template.
    :param allow_rewind: let that commit move a group's destination offset backwards; a bool or a template.
    :param plan_task_id: task id of the planning task whose XCom summary names the batch, its plan and its report.
    :param dry_run: translate and report only: no checkpoint, commit, file or state (a bool or a template).
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``. The trigger rule defaults
        to ``none_failed_min_one_success``.
    """

    template_fields = (*DryRunOperator.template_fields, "commit_offsets", "allow_rewind")

    def __init__(self, *, commit_offsets: bool | str = False, allow_rewind: bool | str = False,
                 plan_task_id: str = "plan_copy", **kwargs) -> None:
        # after the copy report, also when the copy skipped for lack of work; not when the branch skipped it all
        kwargs.setdefault("trigger_rule", "none_failed_min_one_success")
        super().__init__(**kwargs)
        self.commit_offsets = commit_offsets
        self.allow_rewind = allow_rewind
        self.plan_task_id = plan_task_id

    @fail_fast
    def execute(self, context: Any) -> dict:
        status = promotion_status(self.state_store)
        if status and status.get("status") == "promoted":
            self.log.info("migration %s is promoted: catch-up translation skipped", self.spec.name)
            return {"skipped": "promoted"}
        result = translate_migration(self.spec, self.source_cluster, self.destination_cluster, self.state_store,
                                     catch_up=True)
        summary = result.summary()
        if self.is_dry_run:  # the translations as they stand; no checkpoint, commit, file or state
            summary["dry_run"] = True
            self.log.info("dry run of %s: translation %s; nothing written", self.spec.name, summary)
            return summary
        translation_measured(self.spec.name, summary)
        summary["checkpoints"] = checkpoint_translations(self.spec, self.destination_cluster, result.decisions)
        json_path, csv_path = export_offset_map(self.spec, result.copies.values())
        summary["offset_map"] = {"json": str(json_path), "csv": str(csv_path)}
        if parse_bool(self.commit_offsets):
            # The promotions are read again here, right before committing, not taken from the translation's
            # snapshot: a group promoted since then is left to its consumers. One promoted between this read and
            # the commit is still safe: its promotion committed first, from the same final source commit, and a
            # commit is refused while the group has members and keeps a destination offset that is ahead
            # (unless this run allows rewinding).
            committable = without_promoted_groups(self.state_store, result.decisions)
            outcomes = commit_translated_offsets(self.destination_cluster, committable,
                                                 allow_rewind=parse_bool(self.allow_rewind))
            summary["commits"] = [o.as_dict() for o in outcomes]
        summary["ready_groups"] = self.look_at_readiness()
        self.log.info("translation of %s: %s", self.spec.name, {k: v for k, v in summary.items() if k != "commits"})
        page = self.publish_run_page(context, [d.as_dict() for d in result.decisions])
        if page:
            summary["run_report"] = str(page)
        return summary

    def look_at_readiness(self) -> list[str]:
        """Which groups could be promoted now (no members, no recent commit): logged, and saved for the form."""
        now_ms = int(time.time() * 1000)
        readiness = ready_groups(self.source_cluster, self.state_store,
                                 quiet_ms=int(self.spec.promotion.quiesce_window_seconds * 1000), now_ms=now_ms)
        for line in readiness:
            self.log.info("group %s: %s (%s)", line.group, "ready to promote" if line.ready else "not ready",
                          line.reason)
        write_ready_file(work_dir(self.spec.name), readiness, now_ms)
        return [line.group for line in readiness if line.ready]

    def publish_run_page(self, context: Any, groups: list[dict]) -> StoragePath | None:
        """The run's HTML page (batch, translated groups, lag chart) when this run copied or reported a batch."""
        ti = context.get("ti")
        plan = ti.xcom_pull(task_ids=self.plan_task_id) if ti is not None else None
        # derived from the spec and the batch id, never a path from XCom (copy.plan.planned_files)
        report_path = planned_files(self.spec.name, plan)[1] if isinstance(plan, dict) and plan.get("report_path") \
            else None
        if report_path is None or not report_path.exists():
            return None  # a dry run, or a DAG without the copy tasks
        report = json.loads(report_path.read_text())
        page = publish_batch_run(self.spec, work_dir(self.spec.name), context.get("run_id") or report["batch_id"],
                                 report, groups, batch_history(self.state_store))
        self.log.info("run report: %s", page)
        return page
