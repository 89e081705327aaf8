"""The promotion's hand-over of the Spark Structured Streaming checkpoints the spec lists
(``consumers.spark_checkpoints``), right after its final translation wrote the offset map.

Why in the promotion: the final translation's offset map is exact only for the copy it closes, and a query handed
over then resumes on the destination from the same cut as the promoted groups. Each checkpoint is handed over or
refused on its own (``translation.spark_checkpoint.hand_over``); a refused one fails the task once (a permanent
failure) naming it and why, after the others were written, and the promotion stops before its mark. The way out:
stop that query and clear this task (the written ones are not written again), or take the entry out of the spec and
hand the query over later with ``kafka-ferry checkpoint rewrite``.
"""

from __future__ import annotations

from typing import Any

from kafka_ferry.operators.base import MigrationOperator
from kafka_ferry.operators.failures import fail_fast
from kafka_ferry.translation.spark_checkpoint import hand_over
from kafka_ferry.translation.translate import default_work_dir


class HandOverSparkCheckpointsOperator(MigrationOperator):
    """Rewrites each listed checkpoint to resume on the destination; returns one line of outcome per checkpoint."""

    ui_color = "#f8e8d8"

    @fail_fast
    def execute(self, context: Any) -> dict:
        entries = [(c.checkpoint, c.file_sink) for c in self.spec.consumers.spark_checkpoints]
        results = hand_over(default_work_dir(self.spec), self.spec.name, entries,
                            query_bootstrap=self.destination_cluster.bootstrap_servers)
        for result in results:
            for line in result.lines():
                self.log.info("%s", line)
        return {"checkpoints": [{"checkpoint": r.checkpoint, "status": r.status, "batch": r.batch}
                                for r in results]}
