"""Fail-fast task failures; defined in kafka_ferry.task_support (shared with sensors), re-exported here."""

from kafka_ferry.task_support import DETERMINISTIC, fail_fast, is_deterministic

__all__ = ["DETERMINISTIC", "fail_fast", "is_deterministic"]
