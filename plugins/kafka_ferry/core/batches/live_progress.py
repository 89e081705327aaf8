"""A batch while it runs: what each planned partition has copied so far, the rate, the time to the batch's end.

Built from what the copy already records: the plan's tasks (``[start, end)`` per partition) and the progress
records the partition copiers write to the state topic when a partition's copy is acknowledged
(``core.batches.progress.PartitionProgress``, with the state store's ``written_at_ms``). A progress record belongs to
this batch when its ``batch_id`` is the plan's; before that, the partition shows 0 (still copying or waiting
for its Spark task), so the view moves partition by partition, never ahead of what is durably copied.

Rate: offsets copied by the finished partitions over the time from the batch's start to the newest of their
records; the time to the end: the planned offsets not yet recorded at that rate. Pure: no Kafka, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka_ferry.core.batches.backlog_eta import format_duration
from kafka_ferry.core.common.state_records import WRITTEN_AT


def live_view(migration: str, batch_id: str, tasks: Iterable[Mapping[str, Any]],
              progress: Mapping[tuple[str, int], Mapping[str, Any]], started_at_ms: int,
              as_of_ms: int) -> dict[str, Any]:
    """The in-progress view of batch ``batch_id``: rows per planned partition, totals, rate, time to the end.

    ``tasks``: the plan's partition tasks as dicts (source_topic, partition, start_offset, end_offset);
    ``progress``: the stored progress records by (source topic, partition), as read from the state topic."""
    rows, newest = [], None
    for task in sorted(tasks, key=lambda t: (t["source_topic"], t["partition"])):
        planned = max(0, task["end_offset"] - task["start_offset"])
        record = progress.get((task["source_topic"], task["partition"]))
        done = record is not None and record.get("batch_id") == batch_id
        if record is not None and done:
            copied = min(planned, max(0, record["next_upstream_offset"] - task["start_offset"]))
            finished_ms = record.get(WRITTEN_AT)
        else:
            copied, finished_ms = 0, None
        if finished_ms:
            newest = max(newest or 0, finished_ms)
        rows.append({"source_topic": task["source_topic"], "partition": task["partition"],
                     "status": "finished" if done else "copying or waiting", "planned": planned, "copied": copied,
                     "finished_at_ms": finished_ms, "finished": _clock(finished_ms)})
    planned, copied = sum(r["planned"] for r in rows), sum(r["copied"] for r in rows)
    done = sum(r["status"] == "finished" for r in rows)
    elapsed_s = ((newest or 0) - started_at_ms) / 1000
    rate = copied / elapsed_s if copied and elapsed_s > 0 else None
    remaining_s = (planned - copied) / rate if rate else (0.0 if done == len(rows) else None)
    if not rows:
        sentence = "nothing planned: the batch has nothing to copy"
    elif remaining_s is None:
        sentence = (f"0 of {len(rows)} partitions finished: no rate yet (a partition's progress is recorded when its "
                    "copy finishes)")
    else:
        sentence = (f"{done} of {len(rows)} partitions finished, {copied:,} of {planned:,} offsets copied"
                    + (f" at {rate:,.0f} records/s" if rate else "")
                    + (f": the batch's end in about {format_duration(remaining_s)}" if remaining_s else
                       ": every partition finished, the batch is closing"))
    return {"migration": migration, "batch_id": batch_id, "started_at_ms": started_at_ms, "as_of_ms": as_of_ms,
            "partitions": len(rows), "partitions_done": done, "planned": planned, "copied": copied,
            "records_per_s": None if rate is None else round(rate, 1), "remaining_s": remaining_s,
            "remaining_text": None if remaining_s is None else format_duration(remaining_s), "sentence": sentence,
            "rows": rows}


def _clock(ms: int | None) -> str:
    if not ms:
        return ""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S UTC")
