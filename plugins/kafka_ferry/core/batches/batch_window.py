"""A copy batch's window (``copy.window``): its deadline, the batch sized to end inside it, and why a batch stopped.

``copy.window`` is either a duration (``4h``, ``90min``, ``1h30min``) counted from the run's due time, or an end
time (``05:00``) in the DAG's timezone: the first such wall-clock time after the run was due. Why the due time
and not the planning time: a retried or late-started task must not get a fresh window; a nightly run due at
01:00 with ``05:00`` ends at 05:00 whenever it starts, and a run that starts after 05:00 copies nothing (its
window closed). An end time earlier in the day than the due time is the next day's (23:00 -> 05:00 crosses
midnight).

Sizing: from the migration's rate (``core.batches.copy_rate``: its previous busy batches, end to end, so the fixed cost
of a batch is in it; never above the rate limit), the records the rest of the window can take; split over the
partitions max-min fairly (``fair_split``: each gets an equal share, a partition needing less gives the rest to the
others). A wrong estimate is no harm: the copier stops at the deadline anyway, at a chunk boundary.

Fair in time too (``lane_order``, ``share_deadline``): a copier lane copies its partitions one after another, so
an offsets budget alone cannot keep the window fair. Before the first busy batch there is no rate and no budget
(the deadline alone bounds the batch), and a rate that overestimates gives a budget the window cannot hold: either
way the deadline would cut the lane's first partitions and leave the later ones nothing, in every window, while
their lag grows (ties in the plan's order put the same partitions last each time). So each partition of a lane
gets an equal share of the lane's time left when it starts, and the lane goes fewest planned offsets first: a
partition needing less than its share hands the rest on, and the ones cut at their share are those needing more
than an equal share, max-min fair in time as ``fair_split`` is in offsets.

Pure: no clock; times are epoch milliseconds passed in, zones are IANA names (zoneinfo).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kafka_ferry.core.common.failures import Permanent

MAX_WINDOW_S = 7 * 24 * 3600  # the longest copy task timeout (timeouts.copy_seconds)
SIZING_SAFETY = 0.9  # plan for 90 % of the time left: the measured rate is an average

# Why a batch (or one partition of it) stopped: the report's ``stop_reason`` field.
STOP_DEADLINE = "deadline"    # the window's deadline, or the partition's share of it (share_deadline), came; or it had
                              # passed before the batch started
STOP_LIMIT = "limit"          # a bound of the batch: max_records/bytes_per_partition, or sized to the window
STOP_CAUGHT_UP = "caught_up"  # everything the source held when the batch was planned is copied
STOP_REASONS = (STOP_DEADLINE, STOP_LIMIT, STOP_CAUGHT_UP)

_DURATION = re.compile(r"(?:(?P<h>\d{1,3})h)?(?:(?P<min>\d{1,5})min)?(?:(?P<s>\d{1,6})s)?")
_END_TIME = re.compile(r"(?P<hour>[01]\d|2[0-3]):(?P<minute>[0-5]\d)")


@dataclass(frozen=True)
class Window:
    """Either ``seconds`` (a duration) or ``end`` (hour, minute), never both."""

    seconds: int | None = None
    end: tuple[int, int] | None = None

    def __str__(self) -> str:
        if self.seconds is not None:
            return f"{self.seconds} s"
        hour, minute = self.until
        return f"until {hour:02d}:{minute:02d}"

    @property
    def until(self) -> tuple[int, int]:
        """(hour, minute) of a window that ends at a wall-clock time."""
        if self.end is None:
            raise ValueError(f"a window of {self.seconds} s has no end time")
        return self.end


def parse_window(text: str) -> Window:
    """``4h``, ``90min``, ``1h30min``, ``45s`` or ``05:00``; a ValueError saying what is accepted otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"a window is a string such as '4h', '90min' or '05:00', got {text!r}")
    value = text.strip()
    if match := _END_TIME.fullmatch(value):
        return Window(end=(int(match["hour"]), int(match["minute"])))
    match = _DURATION.fullmatch(value.replace(" ", ""))
    if value and match and any(match.groupdict().values()):
        seconds = int(match["h"] or 0) * 3600 + int(match["min"] or 0) * 60 + int(match["s"] or 0)
        if not 0 < seconds <= MAX_WINDOW_S:
            raise ValueError(f"window {text!r} is {seconds} s; a window is more than 0 s and at most 7 days")
        return Window(seconds=seconds)
    raise ValueError(f"window {text!r} is neither a duration ('4h', '90min', '1h30min', '45s') nor an end time "
                     "('05:00', 24-hour HH:MM in the DAG's timezone)")


class UnknownTimezone(Permanent, ValueError):
    """The DAG's timezone is no IANA zone name (a fixed offset such as ``+01:00``): an end-time window cannot be
    placed. Permanent: the same zone gives the same answer on every try."""


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name`` (Airflow writes its default ``utc`` in lower case)."""
    try:
        return ZoneInfo("UTC" if name.strip().upper() == "UTC" else name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UnknownTimezone(f"timezone {name!r} is not an IANA zone name: copy.window's end time is wall-clock "
                              "time in the DAG's timezone; set Airflow's default_timezone to a zone name such as "
                              "'Europe/Paris', or give the window as a duration ('4h')") from exc


def window_deadline(window: Window, due_ms: int, timezone: str = "UTC") -> int:
    """The deadline (epoch ms) of a run due at ``due_ms``: due + duration, or the first ``end`` wall-clock time
    in ``timezone`` strictly after the due time (the next day's when today's is not after it)."""
    if window.seconds is not None:
        return due_ms + window.seconds * 1000
    tz = zone(timezone)
    due = datetime.fromtimestamp(due_ms / 1000, tz)
    hour, minute = window.until
    day = due.date()
    for _ in range(3):  # today, tomorrow (a DST gap can only push it forward, never past the day after)
        # The day clocks go back shows the end time twice (fold 0, then fold 1, an hour later): a run due
        # between the two ends at the second, not a day later. Elsewhere both folds name one instant; in a
        # DST gap fold 1 is the earlier one, so trying fold 0 first keeps a gap's end time where it was.
        for fold in (0, 1):
            candidate = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz, fold=fold)
            if candidate.timestamp() * 1000 > due_ms:
                return int(candidate.timestamp() * 1000)
        day += timedelta(days=1)
    raise AssertionError("unreachable: an end time recurs every day")


def window_length_s(window: Window, schedule: str | None = None) -> float | None:
    """How long a run's window is, for the ETA's "in N windows of 4 h": a duration's seconds; an end time's
    distance from the start of a daily ``schedule`` whose minute and hour are fixed ("0 1 * * *" with "05:00": 4 h;
    an end at or before the start is the next day's). None when the schedule does not fix it (an end time with
    "@daily", "*/5 * * * *" or no schedule): the ETA is then given in copy time only.

    Takes a parsed ``Window``: the one parser (``parse_window``) is the spec's validator, so a window the spec
    would refuse never reaches the ETA."""
    if window.seconds is not None:
        return float(window.seconds)
    start = _daily_start(schedule)
    if start is None:
        return None
    hour, minute = window.until
    return float((hour * 3600 + minute * 60 - start) % _DAY or _DAY)


_DAY = 86400


def schedule_cycle_s(schedule: str | None) -> float | None:
    """How often a run (so a window) comes: 24 h for a daily schedule (a fixed minute and hour, "@daily"); None
    when the schedule says no simple period (the ETA then counts no gaps between windows)."""
    text = (schedule or "").strip()
    if text in ("@daily", "@midnight"):
        return float(_DAY)
    fields = text.split()
    return float(_DAY) if _daily_start(text) is not None and fields[2:] == ["*", "*", "*"] else None


def _daily_start(schedule: str | None) -> int | None:
    """Seconds after midnight a cron schedule with a fixed minute and hour starts at; None otherwise."""
    fields = (schedule or "").split()
    if len(fields) == 5 and fields[0].isdigit() and fields[1].isdigit():
        minute, hour = int(fields[0]), int(fields[1])
        if minute < 60 and hour < 24:
            return hour * 3600 + minute * 60
    return None


def records_budget(rate: float | None, now_ms: int, deadline_ms: int, safety: float = SIZING_SAFETY) -> int | None:
    """How many records the rest of the window can take at ``rate`` (None: no estimate, no bound); 0 once the
    deadline has passed, and only then: a window still open plans at least one record, so a run planned in its
    last instant copies what it can until the deadline stops it and says so (``deadline``/``limit``), where an
    empty plan would read as "caught up" with lag left."""
    if now_ms >= deadline_ms:
        return 0
    if rate is None:
        return None
    return max(1, int(rate * (deadline_ms - now_ms) / 1000 * safety))


def fair_split(needs: Sequence[int], budget: int) -> list[int]:
    """Max-min fair shares of ``budget`` for partitions needing ``needs``: each gets at most its need, the sum
    is at most the budget, and if any gets less than it needs, none gets more than one above it."""
    if budget < 0 or any(n < 0 for n in needs):
        raise ValueError(f"fair_split: budget {budget} and needs must be >= 0")
    shares = [0] * len(needs)
    left = budget
    order = sorted(range(len(needs)), key=lambda i: (needs[i], i))
    for rank, i in enumerate(order):
        remaining = len(order) - rank
        share, extra = divmod(left, remaining)
        # the larger needs come last: the leftover units go to them, one each
        shares[i] = min(needs[i], share + (1 if remaining - 1 < extra else 0))
        left -= shares[i]
    return shares


def lane_order(needs: Sequence[int]) -> list[int]:
    """The order a lane copies its partitions in under a deadline: indexes of ``needs`` (planned offsets), fewest
    first, ties by index. Why: with ``share_deadline`` a partition that needs less than its share finishes early
    and leaves its time to the partitions after it, so the biggest, which can use any time left, come last."""
    return sorted(range(len(needs)), key=lambda i: (needs[i], i))


def share_deadline(now_ms: int, deadline_ms: int, partitions_left: int) -> int:
    """When the partition a lane starts at ``now_ms`` stops, ``partitions_left`` counting it: an equal share of the
    time to the window's deadline (the last one, or a lane past the deadline, gets the deadline itself).

    Why not an offsets budget: offsets need a rate, which the first window has not measured; time needs none. A
    partition started before the deadline gets a share > 0, so it copies at least its first chunk (the copier
    checks its deadline between chunks). Every partition of a lane of ``n`` starts before the deadline when the
    window is longer than ``n * c * H(n-1)`` (``c`` the longest chunk, ``H`` the harmonic number): each partition
    overruns its share by less than one chunk, and the next shares absorb it (``tests/unit/core``'s simulation
    checks the bound over sequences of windows)."""
    if partitions_left < 1:
        raise ValueError(f"share_deadline: partitions_left {partitions_left} must be >= 1")
    if now_ms >= deadline_ms or partitions_left == 1:
        return deadline_ms
    return now_ms + (deadline_ms - now_ms) // partitions_left


def batch_stop_reason(partition_reasons: Iterable[str], window_closed: bool = False) -> str:
    """A batch stopped at the deadline if any partition did, else at a limit if any did, else it caught up."""
    reasons = set(partition_reasons)
    if window_closed or STOP_DEADLINE in reasons:
        return STOP_DEADLINE
    return STOP_LIMIT if STOP_LIMIT in reasons else STOP_CAUGHT_UP
