"""A migration's copy rate: the one place it is computed, for the window's sizing and for the ETA to lag 0.

Definition (one, for both consumers): records and bytes per second of *batch time* (each batch's ``duration_s``,
end to end: engine start, tail read and report included, since every future batch pays them too), over the newest
``RATE_HISTORY`` batches that copied something and were *busy to their end* (stopped at a deadline or a limit).

Why both consumers take the same rate:

- The window sizes a batch from what one second of batch time copies; that is this rate by construction.
- The ETA answers "how much copy time until lag 0, i.e. how many windows": a person planning windows needs the
  capacity of a window hour, not the average over the calendar. A rate over wall time (gaps between batches
  included) would fold the schedule into the rate: a nightly 4 h window would show a sixth of the copy's
  capacity, the ETA's "in N windows of 4 h" would count the 20 idle hours twice, and changing the schedule
  would change the "measured rate" without the copy changing at all. The gaps enter where they act: the
  producers' inflow runs around the clock, is measured over wall time (``core.batches.backlog_eta.inflow_rate``), and
  the ETA adds what it brings between two windows (``core.batches.backlog_eta.windowed_eta``).
- Why only busy batches, for both: a batch that caught up copied what there was; ten records after a four-second
  start say how much was new, not how fast the copy goes. In the sizing it would plan tonight's window for a
  trickle; in the ETA it would promise a catch-up weeks away the day a backlog builds up. Such batches only
  bound the capacity from below, so they are left out, and the answer is "not measured yet" until a busy batch.

Batch records (kind "batch") and backlog records (kind "backlog") both carry ``records_copied``,
``bytes_copied``, ``duration_s``, ``stop_reason`` and ``finished_at_ms``; either kind goes in as mappings.
Pure: no clock, no Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_ferry.core.batches.batch_window import STOP_DEADLINE, STOP_LIMIT
from kafka_ferry.core.batches.rate_limit import RateLimit

RATE_HISTORY = 5  # batches the measured rate averages over (the newest busy ones that copied something)
BUSY = (STOP_DEADLINE, STOP_LIMIT)  # a batch that stopped for one of these ran flat out to its end


@dataclass(frozen=True)
class MeasuredRate:
    """What the migration's recent busy batches moved, per second of their whole duration."""

    records: int
    bytes: int
    seconds: float
    batches: int

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds

    @property
    def bytes_per_second(self) -> float:
        return self.bytes / self.seconds

    @property
    def mean_record_bytes(self) -> float:
        return self.bytes / self.records

    @property
    def reason(self) -> str:
        return (f"measured over the last {self.batches} busy batch(es) ({self.records} records in "
                f"{self.seconds:.1f} s of batch time, engine start included)")


NOT_MEASURED = ("no busy batch yet: none has copied a record, or every one caught up (copied all there was, "
                "which says how much was new, not how fast the copy goes)")


def is_busy(batch: Mapping[str, Any]) -> bool:
    """The batch copied something and ran to a deadline or a limit, with a usable duration and byte count."""
    return (batch.get("stop_reason") in BUSY
            and isinstance(batch.get("records_copied"), int) and batch["records_copied"] > 0
            and isinstance(batch.get("duration_s"), int | float) and batch["duration_s"] > 0
            and isinstance(batch.get("bytes_copied"), int))


def measured_rate(batches: Iterable[Mapping[str, Any]], last: int = RATE_HISTORY) -> MeasuredRate | None:
    """The rate of the newest ``last`` busy batches (by ``finished_at_ms``); None before any (``NOT_MEASURED``)."""
    useful = sorted((b for b in batches if is_busy(b)), key=lambda b: b.get("finished_at_ms") or 0)
    recent = useful[-last:]
    if not recent:
        return None
    return MeasuredRate(sum(b["records_copied"] for b in recent), sum(b["bytes_copied"] for b in recent),
                        float(sum(b["duration_s"] for b in recent)), len(recent))


def sizing_rate(measured: MeasuredRate | None, limit: RateLimit) -> float | None:
    """The records per second to size a window's batch with: the measured rate, never above the limit; the limit
    alone (an upper bound) when nothing was measured yet; None when neither says anything."""
    rates = []
    if measured is not None:
        rates.append(measured.records_per_second)
    if limit.records_per_second is not None:
        rates.append(limit.records_per_second)
    if limit.bytes_per_second is not None and measured is not None and measured.records:
        rates.append(limit.bytes_per_second / max(measured.mean_record_bytes, 1.0))
    return min(rates) if rates else None
