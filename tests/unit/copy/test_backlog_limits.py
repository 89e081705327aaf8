"""The ETA reads the spec's copy limits and window (the window through the one parser, the spec's); a batch's
backlog record keeps the offsets it moved, and its ETA counts the wait for the next window."""

from __future__ import annotations

import pytest
from fakes.state import FakeStateStore
from test_copy_plan import SPEC

from kafka_ferry.copy.backlog import record_backlog, spec_limits
from kafka_ferry.core.common.state_records import BACKLOG_KIND
from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.core.specs.spec_source import SpecError


def spec(schedule=None, **copy):
    return parse_spec({**SPEC, "schedule": schedule, "copy": {**SPEC.get("copy", {}), **copy}}, "acme.yaml")


def test_limits_and_window_come_from_the_copy_section():
    nightly = spec("0 1 * * *", max_bytes_per_second=35_000_000, window="05:00")
    assert spec_limits(nightly) == {"max_bytes_per_s": 35_000_000, "max_records_per_s": None, "window_s": 14400.0,
                                    "cycle_s": 86400.0}
    # a window with no schedule: its length is known, how often it comes is not
    assert spec_limits(spec(max_records_per_second=40, window="1h30min")) == {
        "max_bytes_per_s": None, "max_records_per_s": 40, "window_s": 5400.0, "cycle_s": None}
    # an end time whose start the schedule does not fix: the ETA is in copy time only
    assert spec_limits(spec("@daily", window="05:00"))["window_s"] is None


def test_a_copy_section_without_them_gives_no_limit():
    assert spec_limits(spec()) == {"max_bytes_per_s": None, "max_records_per_s": None, "window_s": None,
                                   "cycle_s": None}


@pytest.mark.parametrize("window", ["1h30m", "soon", "25:00", "0s"])
def test_a_window_the_spec_refuses_never_reaches_the_eta(window):
    # the lenient ETA parser once read "1h30m" as 90 min; the spec (the one parser) refuses it before any ETA
    with pytest.raises(SpecError, match="window"):
        spec(window=window)


def _report(batch_id, finished_at_ms, copied, lag_before, lag_after, partitions):
    return {"batch_id": batch_id, "finished_at_ms": finished_at_ms, "duration_s": 3600.0, "records_copied": copied,
            "bytes_copied": copied * 1000, "lag_before_total": lag_before, "lag_after_total": lag_after,
            "stop_reason": "deadline",
            "partitions": [{"planned_start": s, "next_upstream_offset": n} for s, n in partitions]}


def test_a_batch_keeps_the_offsets_it_moved_and_its_eta_counts_the_wait_for_the_next_window():
    store = FakeStateStore().created()  # the real store on the in-memory cluster (tests/fakes)
    nightly = spec("0 1 * * *", window="05:00")
    # 300,000 of the 750,000 offsets passed were already on the destination (a retried batch): moved, not copied
    first = record_backlog(nightly, _report("a", 0, 450_000, 1_000_000, 250_000, [(0, 500_000), (100, 250_100)]),
                           store)
    assert first["offsets_progressed"] == 750_000
    assert store.read_kind(BACKLOG_KIND)["a"]["offsets_progressed"] == 750_000
    # a day later producers had added 86,400 offsets (1/s); a retry of a killed batch moved 43,200 offsets whose
    # records its first attempt had already put on the destination, copying none
    second = record_backlog(nightly, _report("b", 86_400_000, 0, 336_400, 293_200,
                                             [(500_000, 521_600), (250_100, 271_700)]), store)
    assert second["offsets_progressed"] == 43_200
    assert second["inflow_records_per_s"] == pytest.approx(1.0)  # counting copied records alone: 0.5
    # the ETA is taken as this batch's window ends: the producers' records until the next one count first
    measured = next(e for e in second["etas"] if e["label"].startswith("at the measured rate"))
    assert "plus 82,800 the producers add in the 23 h before the next window" in measured["reason"]
    assert second["etas"][0]["label"].startswith("counting batches")  # the batch-counted ETA comes first


def test_a_batch_keeps_when_it_was_planned_and_the_next_eta_counts_its_whole_run():
    # spark-submit: the copy inside the engine took 4 s, the run from the plan 64 s (the JVM and SparkContext
    # start before the copy's clock): the counted ETA takes the run, from the first batch on
    store = FakeStateStore().created()
    report = {**_report("a", 1_000_064_000, 7_600, 60_800, 53_800, [(0, 400)] * 19), "duration_s": 4.0,
              "stop_reason": "limit", "planned_at_ms": 1_000_000_000,
              "partitions": [{"planned_start": 0, "next_upstream_offset": 400, "lag_after": 2_831}] * 19}
    first = record_backlog(spec(max_records_per_partition=400), report, store)
    assert store.read_kind(BACKLOG_KIND)["a"]["planned_at_ms"] == 1_000_000_000
    counted = first["etas"][0]
    assert counted["label"].startswith("counting batches (at most 400 records per partition each, 1 min per batch")
    # the producers added 600 offsets in the 64 s run (53,800 - 60,800 + 7,600): 9.4/s, known after one batch
    assert first["inflow_records_per_s"] == pytest.approx(600 / 64, abs=0.05)
    assert counted["batches"] == 8 and counted["seconds"] == pytest.approx(8 * 64.0)
