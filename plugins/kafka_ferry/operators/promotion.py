"""Promotion steps as a task: runs the given ``PromotionRunner`` steps, resuming those already done.

Why several tasks share one runner: the DAG puts sensors between steps (lag 0 after the final copy,
group offsets synced after the commit), and each task's retry resumes from the state topic, not XCom.
"""

from __future__ import annotations

from typing import Any

from kafka_ferry.operators.base import MigrationOperator
from kafka_ferry.promotion.runner import STEPS, PromotionRunner


class PromoteMigrationOperator(MigrationOperator):
    """Runs promotion ``steps`` (subset of STEPS, in order); returns the report without per-row detail."""

    template_fields = (*MigrationOperator.template_fields, "allow_rewind")
    ui_color = "#f8d8d8"

    def __init__(self, *, steps: tuple[str, ...] | list[str] = STEPS, allow_rewind: bool | str = False,
                 work_dir: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        unknown = set(steps) - set(STEPS)
        if unknown:
            raise ValueError(f"unknown promotion steps {sorted(unknown)}; known: {list(STEPS)}")
        self.steps = tuple(steps)
        self.allow_rewind = allow_rewind
        self.work_dir = work_dir

    def execute(self, context: Any) -> dict:
        runner = PromotionRunner(self.spec, self.source_hook, self.destination_hook, self.state_store,
                                 work_dir=self.work_dir, allow_rewind=self.allow_rewind in (True, "True", "true"))
        report = runner.run(self.steps)
        self.log.info("promotion report: %s", report["report_path"])
        return {k: v for k, v in report.items() if k not in ("groups", "reconciliation")}
