"""Report file names map one-to-one to run ids (issue 24: two run ids shared one file and overwrote each other)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.reports.publish import run_file_name, run_id_of_file_name, run_page_path

SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-~")


def test_the_issues_two_run_ids_get_two_files():
    a, b = "manual__2026-11-25T07_00_00_00_00", "manual__2026-11-25T07:00:00+00:00"
    assert run_page_path(Path("m"), a) != run_page_path(Path("m"), b)
    assert run_page_path(Path("m"), "manual__1") == Path("m/runs/manual__1.html")  # common ids stay readable


@given(st.text(max_size=300))
def test_names_are_safe_and_decode_back_to_the_run_id(run_id):
    name = run_file_name(run_id)
    assert set(name) <= SAFE and 0 < len(name) <= 200 and not name.startswith(".")
    assert name not in (".", "..") and "/" not in name
    decoded = run_id_of_file_name(name)
    assert decoded == run_id or (decoded is None and name.startswith("~~") and len(name) == 66)


@given(st.text(max_size=80), st.text(max_size=80))
def test_two_run_ids_never_share_a_name(a, b):
    if a != b:
        assert run_file_name(a) != run_file_name(b)
