"""The lag chart: uncopied offsets before and after every batch of a migration, drawn with matplotlib.

Rendered to inline SVG text, so a report page needs no file next to it and no asset from the internet.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

MIN_SPAN = timedelta(minutes=2)  # one batch, or a few in a minute: matplotlib would otherwise span years


def time_window(times: Sequence[datetime]) -> tuple[datetime, datetime]:
    """The x range: the batches' own span, widened to at least MIN_SPAN around its middle."""
    first, last = min(times), max(times)
    if last - first >= MIN_SPAN:
        return first, last
    middle = first + (last - first) / 2
    return middle - MIN_SPAN / 2, middle + MIN_SPAN / 2


def lag_chart_svg(history: Sequence[Mapping[str, Any]], title: str = "Lag per batch") -> str:
    """SVG of lag before/after per batch (x: batch end time); a note instead of a chart for no batches."""
    batches = sorted((b for b in history if b.get("finished_at_ms")), key=lambda b: b["finished_at_ms"])
    if not batches:
        return '<p class="muted">No batch has run yet: no lag history to draw.</p>'
    import matplotlib

    matplotlib.use("Agg")  # no display; must precede pyplot
    from matplotlib import pyplot as plt

    times = [datetime.fromtimestamp(b["finished_at_ms"] / 1000, UTC) for b in batches]
    figure, axes = plt.subplots(figsize=(8, 2.8), dpi=100)
    try:
        # matplotlib's stubs type x as numbers only; its date units plot datetimes (a stub gap)
        axes.plot(times, [b.get("lag_before_total", 0) for b in batches], marker="o", label="lag before batch")  # type: ignore[arg-type]
        axes.plot(times, [b.get("lag_after_total", 0) for b in batches], marker="o", label="lag after batch")  # type: ignore[arg-type]
        axes.set_title(title)
        axes.set_ylabel("uncopied offsets")
        axes.set_ylim(bottom=0)
        return _finish_svg(figure, axes, times, legend={"loc": "upper right"})
    finally:
        plt.close(figure)


def backlog_chart_svg(history: Sequence[Mapping[str, Any]], title: str = "Backlog over the migration's runs",
                      size: tuple[float, float] = (8, 2.8)) -> str:
    """SVG of the backlog (uncopied offsets) before and after each run, the newest point labelled with its
    estimated size; a note instead of a chart before any run. ``history``: a report's ``backlog.history`` rows."""
    runs = sorted((r for r in history if r.get("finished_at_ms")), key=lambda r: r["finished_at_ms"])
    if not runs:
        return '<p class="muted">No run has recorded a backlog yet: nothing to draw.</p>'
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    times = [datetime.fromtimestamp(r["finished_at_ms"] / 1000, UTC) for r in runs]
    after = [r.get("backlog_after") or 0 for r in runs]
    figure, axes = plt.subplots(figsize=size, dpi=100)
    try:
        # matplotlib's stubs type x as numbers only; its date units plot datetimes (a stub gap)
        axes.plot(times, [r.get("backlog_before") or 0 for r in runs], marker=".", linestyle=":", color="#98a2b3",  # type: ignore[arg-type]
                  label="backlog before the run")
        axes.plot(times, after, marker="o", color="#b54708", label="backlog after the run")  # type: ignore[arg-type]
        newest = runs[-1].get("backlog_bytes_after")
        if newest is not None:
            axes.annotate(f"{after[-1]:,} offsets, ~{newest / 1e6:,.1f} MB (estimated)", (times[-1], after[-1]),
                          textcoords="offset points", xytext=(-8, 8), ha="right", fontsize=8)
        axes.set_title(title)
        axes.set_ylabel("uncopied offsets")
        axes.set_ylim(bottom=0, top=max([1, *after, *(r.get("backlog_before") or 0 for r in runs)]) * 1.25)
        return _finish_svg(figure, axes, times, legend={"loc": "upper left", "fontsize": 8})
    finally:
        plt.close(figure)


def _finish_svg(figure: Any, axes: Any, times: Sequence[datetime], legend: dict[str, Any]) -> str:
    """A time chart's common finish (x range, clock labels within a day, grid, legend), as inline SVG text."""
    axes.set_xlim(*time_window(times))
    if times[-1] - times[0] < timedelta(days=1):
        from matplotlib.dates import DateFormatter

        axes.xaxis.set_major_formatter(DateFormatter("%H:%M:%S", tz=UTC))
    axes.grid(alpha=0.3)
    axes.legend(**legend)
    figure.autofmt_xdate()
    figure.tight_layout()
    out = io.StringIO()
    figure.savefig(out, format="svg")
    svg = out.getvalue()
    return svg[svg.index("<svg"):]  # drop the XML prolog and doctype: the SVG sits inside an HTML page
