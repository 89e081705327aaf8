"""Backlog, rate and ETA of a migration's catch-up: how much is left, how fast it goes, when lag reaches 0.

Inputs are numbers the copy already measures (``RunPoint``: one per finished catch-up batch) and the spec's
limits and window length, passed in as plain parameters (seconds, bytes per second), so this module neither
parses the spec nor reads any clock.

Definitions (per migration, summed over its partitions):

  backlog        uncopied offsets: the source's last stable offset minus the stored next offset. Offsets, not
                 records: transaction markers and compacted-away offsets count too, so it is an upper bound.
  backlog bytes  never read from the source (that would cost the copy itself): the records left times the
                 bytes per record the copy measured (key + value, as ``RangeCursor.count`` counts them), so
                 always an estimate (``Backlog.bytes_estimated``).
  copy rate      ``core.batches.copy_rate.measured_rate``, the one the window sizes batches with: records (and bytes)
                 per second of batch time over the newest busy batches (fixed costs per batch included, as in
                 every future batch). Batch time, not wall time: the ETA counts copy time and cuts it into
                 windows (that module says why).
  inflow         what the source's producers added per second, from consecutive batch ends:
                 ``(backlog_after[n] - backlog_after[n-1] + moved[n]) / (end[n] - end[n-1])``, where ``moved`` is
                 the offsets the batch moved the stored positions by (``RunPoint.offsets_moved``). Offsets, not
                 copied records: the backlog is offsets, and a batch also passes offsets it copies nothing for
                 (records an earlier attempt already put on the destination, loop-guarded records, transaction
                 markers, compaction holes); counting only copied records would take those for producers that
                 stopped, and a smaller inflow is a shorter, false ETA.
  ETA            copy time until lag 0: ``backlog / (copy rate - inflow)``, assuming both stay as measured; in
                 windows: that copy time cut into windows of the given length (``ceil``; the length from
                 ``core.batches.batch_window.window_length_s``, over the spec's validated ``copy.window``). When the
                 windows come once per known cycle (a daily schedule), the producers' records between two
                 windows are counted too (``windowed_eta``): a window a day must copy a day's inflow first.
                 An ETA taken when a window ends (the report after a batch) counts from the next window, so the
                 producers' records until it opens are added first (``until_next_window_s``).

Every estimate carries a reason (no rate yet, backlog growing faster than the copy, limit above the measured
rate, ...), as the translation decisions do. Pure: no Kafka, no Airflow, no clock.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

from kafka_ferry.core.batches.copy_rate import NOT_MEASURED, RATE_HISTORY, MeasuredRate, measured_rate

MAX_ETA_S = 10 * 365 * 86400  # beyond this an ETA is "never", said with its reason
MB = 1_000_000  # decimal megabytes, as a rate limit is usually written ("35 MB/s")


@dataclass(frozen=True)
class RunPoint:
    """One finished catch-up batch as the backlog history keeps it."""

    batch_id: str
    finished_at_ms: int
    duration_s: float
    records_copied: int
    bytes_copied: int
    backlog_before: int
    backlog_after: int
    stop_reason: str | None = None  # core.batches.batch_window.STOP_REASONS: only busy batches measure the copy rate
    # Offsets the batch moved the stored positions by, summed over its partitions (None in records kept before
    # it was measured: the copied records stand in for it there).
    offsets_progressed: int | None = None
    # When the batch was planned (its plan's ``planned_at_ms``: the backlog before is measured then); None in
    # records kept before it was: the batch's own duration stands in for its run then.
    planned_at_ms: int | None = None

    @property
    def offsets_moved(self) -> int:
        return self.records_copied if self.offsets_progressed is None else self.offsets_progressed

    @property
    def run_s(self) -> float:
        """Seconds from the plan to the batch's end: what one catch-up run costs besides the wait for it.

        ``duration_s`` is the copy's own time, measured inside the engine: spark-submit's JVM start and the
        SparkContext (seconds, in the field most of a batch) come before it, so a cost taken from it alone
        leaves them to the time between batches, which is unknown until two batches ended."""
        if self.planned_at_ms is None or self.planned_at_ms <= 0:
            return self.duration_s
        return max(self.duration_s, (self.finished_at_ms - self.planned_at_ms) / 1000)


@dataclass(frozen=True)
class Eta:
    """When lag reaches 0 copying at ``label``'s rate; ``seconds`` None when it never does (``reason`` says why)."""

    label: str
    seconds: float | None
    records_per_s: float | None
    windows: int | None
    window_s: float | None
    reason: str
    cycle_s: float | None = None  # one window per this many seconds (a daily schedule's 24 h); None: not known
    batches: int | None = None  # counted batches until lag 0 (``batch_eta``); None: not counted

    @property
    def sentence(self) -> str:
        """"at 35 MB/s: lag 0 in 9 h 20 min, i.e. in 3 windows of 4 h" (or why there is no ETA)."""
        if self.seconds is None:
            return f"{self.label}: no ETA ({self.reason})"
        if self.seconds == 0:
            return f"{self.label}: lag is 0 ({self.reason})"
        text = f"{self.label}: lag 0 in {format_duration(self.seconds)}"
        if self.batches is not None:
            text += f", after {self.batches} batch{'es' if self.batches != 1 else ''}"
        if self.windows is not None and self.window_s:
            text += f", i.e. in {self.windows} window{'s' if self.windows != 1 else ''} of " \
                    f"{format_duration(self.window_s)}"
            if self.cycle_s:
                text += f", one every {format_duration(self.cycle_s)}"
        return text


def format_duration(seconds: float) -> str:
    """Rounded to what a person plans with: "45 s", "12 min", "9 h 20 min", "3 d 4 h"."""
    if 0 < seconds < 1:
        return "< 1 s"
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    minutes = s // 60 if s < 3600 else int(round(s / 60))
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    days, hours = divmod(hours + (1 if minutes >= 30 else 0), 24)
    return f"{days} d" + (f" {hours} h" if hours else "")


def format_bytes_rate(bytes_per_s: float) -> str:
    return f"{bytes_per_s / MB:.3g} MB/s"


def format_records_rate(records_per_s: float) -> str:
    return f"{records_per_s:,.0f} records/s"


def bytes_per_record(points: Sequence[RunPoint], sampled: float | None = None) -> float | None:
    """Mean bytes per copied record over every batch; before any, a sampled figure (pre-flight) or None."""
    records = sum(p.records_copied for p in points)
    if records > 0:
        return sum(p.bytes_copied for p in points) / records
    return sampled


def inflow_rate(points: Sequence[RunPoint], last: int = RATE_HISTORY) -> float | None:
    """Records the source's producers added per second between the last ``last`` + 1 batch ends; with one batch,
    between its plan and its end (``(backlog_after - backlog_before + moved) / run``); None before any batch, or
    with one batch whose plan time is not kept.

    Why the one batch too: without a rate the counted ETA after the first batch takes the producers for
    stopped, and a capped catch-up against live producers needs more batches than that says.
    Negative growth (retention deleting uncopied records, a topic leaving the selection) counts as 0: it is
    no copy the migration did."""
    ordered = sorted(points, key=lambda p: p.finished_at_ms)[-(last + 1):]
    if len(ordered) == 1:
        only = ordered[0]
        if only.planned_at_ms is None or only.planned_at_ms <= 0 or only.finished_at_ms <= only.planned_at_ms:
            return None
        added = max(0, only.backlog_after - only.backlog_before + only.offsets_moved)
        return added / ((only.finished_at_ms - only.planned_at_ms) / 1000)
    if len(ordered) < 2:
        return None
    added = sum(max(0, b.backlog_after - a.backlog_after + b.offsets_moved) for a, b in pairwise(ordered))
    seconds = (ordered[-1].finished_at_ms - ordered[0].finished_at_ms) / 1000
    return added / seconds if seconds > 0 else None


def eta(backlog: int, label: str, records_per_s: float | None, inflow_per_s: float | None,
        window_s: float | None = None, cycle_s: float | None = None,
        until_next_window_s: float | None = None) -> Eta:
    """Copy time until ``backlog`` reaches 0 at ``records_per_s`` against ``inflow_per_s``; in windows too.

    ``cycle_s``: one window of ``window_s`` per cycle (a daily schedule: 86400). The copy rate is per second of
    copy time, but producers write around the clock: between two windows they add ``inflow * (cycle - window)``
    that the next window must copy first. So with a cycle the windows are counted per cycle
    (``windowed_eta``), and a copy that outruns its producers while it runs may still never catch up.
    ``until_next_window_s``: with a cycle, the seconds until the next window opens (an ETA taken as a window
    ends); the producers' records meanwhile are added before the first window counted, which is that next one."""
    window = window_s if window_s and window_s > 0 else None
    cycle = cycle_s if window and cycle_s and cycle_s > window else None
    if backlog <= 0:
        return Eta(label, 0.0, records_per_s, 0 if window else None, window, "caught up")
    if records_per_s is None:
        return Eta(label, None, None, None, window, f"no rate measured yet: {NOT_MEASURED}")
    if records_per_s <= 0:
        return Eta(label, None, records_per_s, None, window, "the rate is 0")
    inflow = inflow_per_s or 0.0
    net = records_per_s - inflow
    if net <= 0:
        return Eta(label, None, records_per_s, None, window,
                   f"backlog growing faster than the copy: producers add {inflow:,.0f} records/s, the copy takes "
                   f"{records_per_s:,.0f} records/s")
    seconds = backlog / net
    if seconds > MAX_ETA_S:  # a copy barely ahead of its producers: no date worth planning with
        return Eta(label, None, records_per_s, None, window,
                   f"the copy takes {records_per_s:,.0f} records/s and producers add {inflow:,.0f}: lag 0 is more "
                   f"than {MAX_ETA_S // (365 * 86400)} years away")
    reason = (f"{backlog} records left at {records_per_s:,.0f} records/s"
              + (f" minus {inflow:,.0f} records/s the producers add" if inflow else "")
              + ("" if inflow_per_s is not None else ", producers' rate not measured yet (needs two batches)"))
    if cycle is None or window is None:  # a cycle is only set with a window
        return Eta(label, seconds, records_per_s, math.ceil(seconds / window) if window else None, window, reason)
    waiting = until_next_window_s if until_next_window_s and until_next_window_s > 0 else 0.0
    before_window = inflow * waiting  # what the producers add until the next window opens
    if before_window:
        reason += (f", plus {before_window:,.0f} the producers add in the {format_duration(waiting)} before the "
                   "next window")
    windowed = windowed_eta(backlog + before_window, records_per_s, inflow, window, cycle)
    if windowed is None:
        return Eta(label, None, records_per_s, None, window,
                   f"the windows fall behind: a window of {format_duration(window)} copies "
                   f"{records_per_s * window:,.0f} records, producers add {inflow * cycle:,.0f} in "
                   f"{format_duration(cycle)}; widen the window or raise the limit", cycle)
    windows, copy_seconds = windowed
    if (windows - 1) * cycle > MAX_ETA_S:
        return Eta(label, None, records_per_s, None, window,
                   f"the windows barely outrun the producers: lag 0 is more than "
                   f"{MAX_ETA_S // (365 * 86400)} years away", cycle)
    return Eta(label, copy_seconds, records_per_s, windows, window,
               f"{reason}, also between windows (one of {format_duration(window)} every {format_duration(cycle)})",
               cycle)


def windowed_eta(backlog: float, records_per_s: float, inflow_per_s: float, window_s: float,
                 cycle_s: float) -> tuple[int, float] | None:
    """(windows, copy seconds) until lag 0 when a window of ``window_s`` runs once per ``cycle_s`` and producers
    add ``inflow_per_s`` all the time; None when the windows never catch up. Needs ``records_per_s > inflow``.

    A window drains ``(rate - inflow) * window``; from one window's start to the next the backlog changes by
    ``-(rate * window - inflow * cycle)``. So lag reaches 0 in window ``n``, the first whose starting backlog
    ``backlog - (n - 1) * per_cycle`` one window can drain."""
    net = records_per_s - inflow_per_s
    in_window = net * window_s
    if backlog <= in_window:
        return 1, backlog / net
    per_cycle = records_per_s * window_s - inflow_per_s * cycle_s
    if per_cycle <= 0:
        return None
    before_last = math.ceil((backlog - in_window) / per_cycle)
    # the division rounds: settle on the first n whose starting backlog one window drains, as defined above
    while before_last > 1 and backlog - (before_last - 1) * per_cycle <= in_window:
        before_last -= 1
    while backlog - before_last * per_cycle > in_window:
        before_last += 1
    return before_last + 1, before_last * window_s + (backlog - before_last * per_cycle) / net


def limited_rate(max_bytes_per_s: float | None, max_records_per_s: float | None, bytes_per_rec: float | None,
                 measured: MeasuredRate | None) -> tuple[float | None, str, str]:
    """(records/s, label, reason) the copy would run at under the configured limits; (None, ...) without one.

    The tighter limit wins; a limit above the measured rate cannot be reached, so the measured rate bounds it."""
    candidates: list[tuple[float, str]] = []
    notes: list[str] = []
    if max_bytes_per_s:
        if bytes_per_rec:
            candidates.append((max_bytes_per_s / bytes_per_rec, format_bytes_rate(max_bytes_per_s)))
        else:
            notes.append(f"limit {format_bytes_rate(max_bytes_per_s)} ignored: no bytes per record measured yet")
    if max_records_per_s:
        candidates.append((float(max_records_per_s), format_records_rate(max_records_per_s)))
    if not candidates:
        return None, "at the limit", "; ".join(notes) or "no rate limit configured"
    rate, label = min(candidates)
    reason = f"copying at the configured limit {label}"
    if measured is not None and measured.records_per_second < rate:
        reason = (f"the limit {label} is above the measured rate {format_records_rate(measured.records_per_second)}: "
                  "the measured rate bounds it")
        rate = measured.records_per_second
    return rate, f"at {label}", "; ".join([reason, *notes])


@dataclass(frozen=True)
class BacklogEstimate:
    """A run's backlog and its ETAs, as the state record (kind "backlog") and the run's report keep it."""

    backlog_records: int
    backlog_bytes: int | None
    bytes_estimated: bool
    bytes_per_record: float | None
    copy_records_per_s: float | None
    copy_bytes_per_s: float | None
    inflow_records_per_s: float | None
    rate_reason: str
    etas: tuple[Eta, ...]

    @property
    def sentence(self) -> str:
        return "; ".join(e.sentence for e in self.etas)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["etas"] = [{**asdict(e), "sentence": e.sentence} for e in self.etas]
        out["sentence"] = self.sentence
        return out


def estimate(backlog_records: int, points: Sequence[RunPoint], *, max_bytes_per_s: float | None = None,
             max_records_per_s: float | None = None, window_s: float | None = None, cycle_s: float | None = None,
             sampled_bytes_per_record: float | None = None,
             until_next_window_s: float | None = None, partition_lags: Sequence[int] | None = None,
             cap_per_partition: int | None = None) -> BacklogEstimate:
    """The backlog now and when it reaches 0, at the measured rate and at the configured limit; ``cycle_s``: one
    window per this many seconds, ``until_next_window_s``: the wait for the next one when a window just ended
    (``eta``).

    ``points``: the migration's finished batches (oldest first), the current one included when there is one;
    ``sampled_bytes_per_record``: before any batch, the mean size of a bounded sample of source records.
    ``partition_lags`` (each partition's backlog) and ``cap_per_partition`` (``copy.max_records_per_partition``):
    the ETA counted in batches comes first (``counted_eta``), the rate-only ones after it."""
    per_record = bytes_per_record(points, sampled_bytes_per_record)
    measured = measured_rate(asdict(p) for p in points)
    inflow = inflow_rate(points)
    etas = [eta(backlog_records, "at the measured rate"
                + (f" {format_records_rate(measured.records_per_second)}" if measured else ""),
                measured.records_per_second if measured else None, inflow, window_s, cycle_s, until_next_window_s)]
    if partition_lags is not None:
        counted = counted_eta(partition_lags, points, cap_per_partition, inflow, window_s, cycle_s)
        if counted is not None:
            etas.insert(0, counted)
    limit_rate, label, limit_reason = limited_rate(max_bytes_per_s, max_records_per_s, per_record, measured)
    if limit_rate is not None:
        at_limit = eta(backlog_records, label, limit_rate, inflow, window_s, cycle_s, until_next_window_s)
        etas.append(Eta(at_limit.label, at_limit.seconds, at_limit.records_per_s, at_limit.windows,
                        at_limit.window_s, f"{limit_reason}; {at_limit.reason}", at_limit.cycle_s))
    return BacklogEstimate(
        backlog_records=max(0, backlog_records),
        backlog_bytes=None if per_record is None else int(round(max(0, backlog_records) * per_record)),
        bytes_estimated=True,
        bytes_per_record=None if per_record is None else round(per_record, 1),
        copy_records_per_s=None if measured is None else round(measured.records_per_second, 1),
        copy_bytes_per_s=None if measured is None else round(measured.bytes_per_second),
        inflow_records_per_s=None if inflow is None else round(inflow, 1),
        rate_reason=measured.reason if measured else NOT_MEASURED,
        etas=tuple(etas))


# --- counting batches ------------------------------------------------------------------------------------------
# Why: a rate alone says "lag 0 in 1 s" when each batch may copy at most `copy.max_records_per_partition` records of
# a partition and every batch pays a fixed cost (engine start, planning, the tail read and the report: 65-90 s in
# the field) before and after it copies anything. The lag reaches 0 only after enough batches, each capped and
# each paying its fixed cost; producers keep writing meanwhile. So the batch ETA simulates the batches. A batch's
# cost is its run from plan to end (``RunPoint.run_s``), so an engine's start counts from the first batch on.
MAX_BATCHES = 10_000  # beyond this many batches the lag never reaches 0 worth planning with


@dataclass(frozen=True)
class BatchCost:
    """A batch's time as ``fixed_s + records / records_per_s``: what every batch pays, and the steady copy rate."""

    fixed_s: float
    records_per_s: float
    reason: str


FIT_SPREAD = 1.5  # the largest batch fitted must copy this many times the smallest's records


def batch_cost(points: Sequence[RunPoint], last: int = 2 * RATE_HISTORY) -> BatchCost | None:
    """The fixed cost per batch and the steady rate over the newest batches that copied something, from each
    one's run (``RunPoint.run_s``: plan to end, so an engine's start counts); None before any such batch.

    Batches of sizes far enough apart (the largest at least ``FIT_SPREAD`` times the smallest) are fitted
    (least squares: ``run = fixed + records / rate``). Batches of about one size (every one capped the same, the
    catch-up this ETA is for) cannot separate the two: then a batch of that size is taken to last the median
    of their runs, all of it counted as fixed (the one size is the one that matters: a capped batch). A median,
    not a mean: one slow start (a busy worker, a JVM writing its class archive) is not every start, and a fit
    through sizes a few records apart turns such noise into a rate. A fit that gives a negative fixed cost or
    rate (noise) takes the median too.

    The migration's first batch counts only until a second one copied something: it pays what happens once (on
    Spark Connect the migration's session: the package upload and the Python workers' start, 13 s against 2-4 s
    for every later batch on the ETA bench; on spark-submit, a new host's class archive), which no later batch
    pays again."""
    used = [p for p in sorted(points, key=lambda p: p.finished_at_ms) if p.records_copied > 0 and p.run_s > 0]
    if len(used) > 1 and used[0].finished_at_ms == min(p.finished_at_ms for p in points):
        used = used[1:]  # the migration's first batch (not merely the oldest kept): one-time costs
    used = used[-last:]
    if not used:
        return None
    n = len(used)
    sizes = [p.records_copied for p in used]
    if max(sizes) >= FIT_SPREAD * min(sizes):
        mean_x = sum(sizes) / n
        mean_y = sum(p.run_s for p in used) / n
        sxx = sum((x - mean_x) ** 2 for x in sizes)
        slope = sum((p.records_copied - mean_x) * (p.run_s - mean_y) for p in used) / sxx
        fixed = mean_y - slope * mean_x
        if slope > 0 and fixed >= 0:
            return BatchCost(fixed, 1 / slope, f"fitted over {n} batches: {format_duration(fixed)} fixed per batch, "
                                               f"then {format_records_rate(1 / slope)}")
    typical = statistics.median(p.run_s for p in used)
    return BatchCost(typical, math.inf, f"{format_duration(typical)} per batch, the median of {n} batch"
                                        f"{'es' if n != 1 else ''} of about {statistics.median(sizes):,.0f} records")


def batch_gap_s(points: Sequence[RunPoint], last: int = 2 * RATE_HISTORY) -> float:
    """The time between batches: the median, over the newest consecutive batches, of the seconds from one batch's
    end to the next one's plan (``end[n] - end[n-1] - run[n]``, ``RunPoint.run_s``); 0 before two batches.

    Why: a batch's run is not all a catch-up pays per batch. Between two batches the report task runs, the next
    run is scheduled and its tasks start; the ETA taken after a batch counts from that batch's end, so each
    batch still to come pays this gap as well (the ETA bench measured the gap at a fifth of a batch's duration,
    and the ETA short by as much before it was counted). With a schedule the gap includes the wait for the next
    run, so ``batch_eta``'s interval is then met as measured. A median: one slow start is not every start."""
    ordered = sorted(points, key=lambda p: p.finished_at_ms)[-(last + 1):]
    gaps = [max(0.0, (b.finished_at_ms - a.finished_at_ms) / 1000 - b.run_s) for a, b in pairwise(ordered)]
    return statistics.median(gaps) if gaps else 0.0


@dataclass(frozen=True)
class BatchEta:
    batches: int | None  # None: never (reason says why)
    seconds: float | None  # from now (the last batch's end) to the end of the batch that reaches lag 0
    reason: str


def batch_eta(partition_lags: Sequence[int], records_per_s: float, fixed_s: float, *,
              cap_per_partition: int | None = None, inflow_per_s: float = 0.0, window_s: float | None = None,
              interval_s: float | None = None, gap_s: float = 0.0) -> BatchEta:
    """Batches, and time, until every partition's lag is 0: until the first batch that copies all each partition
    holds when it starts (no cap and no window stops it); what producers add while it runs is the lag it leaves,
    as small as one batch's inflow, the promotion's sensors wait for that.

    Each batch copies, per partition, at most ``cap_per_partition`` records and at most what the partition holds
    when the batch starts; with a window, at most what ``window_s - fixed_s`` of copying moves (shared by the
    partitions in proportion to what each would copy). It lasts ``fixed_s`` plus its records at
    ``records_per_s``. A batch starts when the previous one ends, or ``interval_s`` after the previous one
    started when that is later (a schedule); ``gap_s`` (``batch_gap_s``) passes from one batch's end to the next
    one's start, also before the first, counted from now. Producers add ``inflow_per_s``, spread evenly over the
    partitions, all the time."""
    lags = [max(0.0, float(x)) for x in partition_lags]
    if not lags or sum(lags) <= 0:
        return BatchEta(0, 0.0, "caught up")
    if records_per_s <= 0:
        return BatchEta(None, None, "the rate is 0")
    if fixed_s <= 0 and not cap_per_partition and not window_s and math.isinf(records_per_s):
        return BatchEta(None, None, "neither a batch's cost nor a cap is known")
    per_partition_inflow = max(0.0, inflow_per_s) / len(lags)
    budget = None if not window_s else max(0.0, (window_s - fixed_s) * records_per_s)
    if window_s and budget is not None and budget <= 0:
        return BatchEta(None, None, f"the window ({format_duration(window_s)}) is no longer than a batch's fixed "
                                    f"cost ({format_duration(fixed_s)}): no batch copies anything")
    gap = max(0.0, gap_s)
    lags = [lag + per_partition_inflow * gap for lag in lags]  # what the producers add until the next batch starts
    elapsed = gap
    for batch in range(1, MAX_BATCHES + 1):
        wants = [min(lag, cap_per_partition) if cap_per_partition else lag for lag in lags]
        total = sum(wants)
        if budget is not None and total > budget:
            wants = [w * budget / total for w in wants]
            total = budget
        duration = fixed_s + total / records_per_s
        whole = all(w >= lag - 1e-9 for lag, w in zip(lags, wants, strict=True))
        lags = [lag - w + per_partition_inflow * duration for lag, w in zip(lags, wants, strict=True)]
        if whole:  # this batch copies all its partitions held when it started: what is left came in meanwhile
            return BatchEta(batch, elapsed + duration, f"{batch} batch{'es' if batch != 1 else ''} of "
                                                       f"{format_duration(fixed_s)} fixed cost each")
        cycle = max(duration + gap, interval_s or 0.0)
        lags = [lag + per_partition_inflow * (cycle - duration) for lag in lags]
        elapsed += cycle
        if elapsed > MAX_ETA_S:
            break
    return BatchEta(None, None, "the batches never catch up with the producers at these caps and costs: raise "
                                "copy.max_records_per_partition, widen the window, or run batches more often")


def counted_eta(partition_lags: Sequence[int], points: Sequence[RunPoint], cap_per_partition: int | None,
                inflow_per_s: float | None, window_s: float | None, cycle_s: float | None) -> Eta | None:
    """The ETA counted in batches (``batch_eta``) as an ``Eta``; None before any batch copied something (no
    batch's cost is known: the rate-only ETAs say "not measured yet")."""
    cost = batch_cost(points)
    if cost is None:
        return None
    gap = batch_gap_s(points)
    counted = batch_eta(partition_lags, cost.records_per_s, cost.fixed_s, cap_per_partition=cap_per_partition,
                        inflow_per_s=inflow_per_s or 0.0, window_s=window_s, interval_s=cycle_s, gap_s=gap)
    cap = f"at most {cap_per_partition:,} records per partition each, " if cap_per_partition else ""
    between = f", {format_duration(gap)} between batches" if gap > 0 else ""
    label = f"counting batches ({cap}{cost.reason}{between})"
    reason = counted.reason + ("" if inflow_per_s is not None or counted.batches == 0 else
                               ", producers' rate not measured yet (needs two batches)")
    rate = None if math.isinf(cost.records_per_s) else cost.records_per_s
    return Eta(label, counted.seconds, rate, None, None, reason, None, counted.batches)
