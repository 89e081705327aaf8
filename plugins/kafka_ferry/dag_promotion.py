"""The translation and promotion pieces of a migration DAG, for ``dag_factory.build_migration_dag``.

Why a branch on a Param: a promotion is a deliberate, trigger-form choice (``mode=promote``), never
scheduled; scheduled runs take the default ``catch-up`` path (copy batch, then translate + checkpoint).

Wiring (inside ``with DAG(..., params={..., **promotion_params()})``)::

    branch = add_mode_branch(groups, catch_up_entry="plan_copy", promote_entry=PROMOTE_ENTRY)
    branch >> plan_copy >> copy >> copy_report          # the catch-up copy tasks (issue 3)
    add_translation_tasks(dag, spec_path, copy_report)  # translate + checkpoint after each batch
    add_promotion_tasks(dag, spec, spec_path, branch)   # sensors -> promotion steps
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from airflow.providers.standard.operators.python import BranchPythonOperator
from airflow.sdk import DAG, BaseOperator, Param

from kafka_ferry.core.spec import MigrationSpec
from kafka_ferry.operators.promotion import PromoteMigrationOperator
from kafka_ferry.operators.translation import TranslateOffsetsOperator
from kafka_ferry.sensors.promotion_sensors import (
    GroupOffsetsSyncedSensor,
    ReplicationLagSensor,
    SourceGroupsInactiveSensor,
    SourceQuiescedSensor,
)

CATCH_UP, PROMOTE = "catch-up", "promote"
PROMOTE_ENTRY = ("source_quiesced", "source_groups_inactive")


def promotion_params() -> dict[str, Param]:
    """The trigger-form fields this module reads: ``mode`` and ``allow_rewind``."""
    return {
        "mode": Param(CATCH_UP, type="string", enum=[CATCH_UP, PROMOTE], title="Run mode",
                      description_md="`catch-up`: copy a batch, then translate and checkpoint. `promote`: wait "
                                     "until producers and source consumers stopped, copy to lag 0, translate, "
                                     "commit destination groups, reconcile, mark promoted."),
        "allow_rewind": Param(False, type="boolean", title="Allow rewinding destination groups",
                              description="Promotion may move a destination group's offsets backwards."),
    }


def _choose(catch_up_entry: str | list[str], promote_entry: str | list[str], **context) -> str | list[str]:
    mode = context["params"].get("mode", CATCH_UP)
    if mode not in (CATCH_UP, PROMOTE):
        raise ValueError(f"mode must be {CATCH_UP!r} or {PROMOTE!r}, got {mode!r}")
    return list(promote_entry) if mode == PROMOTE else catch_up_entry


def add_mode_branch(upstream: BaseOperator | None, catch_up_entry: str | list[str],
                    promote_entry: str | list[str] = PROMOTE_ENTRY, task_id: str = "choose_mode") -> BaseOperator:
    """A branch that follows ``catch_up_entry`` or ``promote_entry`` task ids by the ``mode`` param."""
    branch = BranchPythonOperator(task_id=task_id, python_callable=_choose,
                                  op_kwargs={"catch_up_entry": catch_up_entry, "promote_entry": list(promote_entry)})
    if upstream is not None:
        upstream >> branch
    return branch


def add_translation_tasks(dag: DAG, spec_path: str | Path, upstream_task: BaseOperator,
                          commit_offsets: bool = False) -> BaseOperator:
    """Catch-up: translate + checkpoint + offset map after the batch (runs also when the copy skipped)."""
    translate = TranslateOffsetsOperator(task_id="translate_offsets", spec_path=str(spec_path), dag=dag,
                                         commit_offsets=commit_offsets, allow_rewind="{{ params.allow_rewind }}")
    upstream_task >> translate
    return translate


def add_promotion_tasks(dag: DAG, spec: MigrationSpec, spec_path: str | Path, branch: BaseOperator,
                        deferrable: bool = True) -> BaseOperator:
    """Promote: quiesced + groups inactive -> final copy -> lag gate -> translate/commit -> synced gate -> finish."""
    path, p = str(spec_path), spec.promotion
    gate = {"spec_path": path, "dag": dag, "deferrable": deferrable, "mode": "reschedule",
            "poke_interval": p.poke_interval_seconds, "timeout": p.sensor_timeout_seconds}
    quiesced = SourceQuiescedSensor(task_id=PROMOTE_ENTRY[0], **gate)
    inactive = SourceGroupsInactiveSensor(task_id=PROMOTE_ENTRY[1], **gate)
    rewind = "{{ params.allow_rewind }}"
    final_copy = PromoteMigrationOperator(task_id="promote_final_copy", spec_path=path, dag=dag,
                                          steps=("final_copy",), execution_timeout=timedelta(hours=1))
    lag = ReplicationLagSensor(task_id="replication_lag", **gate)
    translate_commit = PromoteMigrationOperator(task_id="promote_translate_commit", spec_path=path, dag=dag,
                                                steps=("final_translation", "commit_offsets"), allow_rewind=rewind)
    synced = GroupOffsetsSyncedSensor(task_id="group_offsets_synced", **gate)
    finish = PromoteMigrationOperator(task_id="promote_reconcile_mark", spec_path=path, dag=dag,
                                      steps=("reconcile", "mark_promoted"))
    branch >> [quiesced, inactive]
    [quiesced, inactive] >> final_copy >> lag >> translate_commit >> synced >> finish
    return finish
