"""The ETA at the limit reads the spec's copy limits and window where the spec has them, and works without."""

from __future__ import annotations

from types import SimpleNamespace

from kafka_ferry.copy.backlog import spec_limits


def test_limits_and_window_come_from_the_copy_section_when_present():
    spec = SimpleNamespace(schedule="0 1 * * *", copy_settings=SimpleNamespace(
        max_bytes_per_second=35_000_000, max_records_per_second=None, window="05:00"))
    assert spec_limits(spec) == {"max_bytes_per_s": 35_000_000, "max_records_per_s": None, "window_s": 14400.0}


def test_a_copy_section_without_them_gives_no_limit():
    spec = SimpleNamespace(schedule=None, copy_settings=SimpleNamespace())
    assert spec_limits(spec) == {"max_bytes_per_s": None, "max_records_per_s": None, "window_s": None}
