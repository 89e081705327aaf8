"""The ETA at the limit reads the spec's copy limits and window (the window through the one parser, the spec's)."""

from __future__ import annotations

import pytest
from test_copy_plan import SPEC

from kafka_ferry.copy.backlog import spec_limits
from kafka_ferry.core.spec import parse_spec
from kafka_ferry.core.spec_source import SpecError


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
