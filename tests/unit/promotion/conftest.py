"""Fixtures of the promotion and rollback unit tests (clusters and state: ``tests/fakes``)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """The migration's work dir (KFERRY_WORK_DIR), where operators publish their reports; not created here."""
    monkeypatch.setenv("KFERRY_WORK_DIR", str(tmp_path / "work"))
    return tmp_path / "work"
