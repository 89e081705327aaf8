"""librdkafka's log through Python logging, each distinct line once per window.

Why: by default librdkafka writes its log to stderr, outside Python logging, and repeats a broker's
connection failure on every reconnect attempt (every 100 ms to 10 s, per broker, per client): a run
against a wrong bootstrap address logged some 2,000 identical ``%3|…|FAIL|`` lines around the one
useful error. Handing confluent-kafka a ``logger`` routes the lines to Python logging (levels, task logs,
handlers); the filter here lets the first of each distinct line through and drops its repeats for
``WINDOW_S``, then says how many were dropped.
"""

from __future__ import annotations

import logging
import re
import threading
import time

LOGGER_NAME = "kafka_ferry.librdkafka"
WINDOW_S = 60.0
# What varies between repeats of one line: the client instance (rdkafka#producer-7) and elapsed times.
_VARIABLE = re.compile(r"rdkafka#\w+-\d+|\bafter \d+ms\b|\d+ms in state")
_MAX_KEYS = 1000


class RepeatFilter(logging.Filter):
    """Passes a record unless an equal one (up to client ids and timings) passed less than ``window_s`` ago."""

    def __init__(self, window_s: float = WINDOW_S, clock=time.monotonic) -> None:
        super().__init__()
        self.window_s = window_s
        self._clock = clock
        self._seen: dict[str, tuple[float, int]] = {}  # key -> (when it last passed, repeats dropped since)
        self._lock = threading.Lock()  # librdkafka's threads and the caller's log at once

    def filter(self, record: logging.LogRecord) -> bool:
        key = f"{record.levelno}:{_VARIABLE.sub('', record.getMessage())}"
        now = self._clock()
        with self._lock:
            passed, dropped = self._seen.get(key, (None, 0))
            if passed is not None and now - passed < self.window_s:
                self._seen[key] = (passed, dropped + 1)
                return False
            if len(self._seen) >= _MAX_KEYS:  # bounded: a flood of distinct lines cannot grow it without end
                self._seen.clear()
            self._seen[key] = (now, 0)
        if dropped:
            record.msg = f"{record.getMessage()} (and {dropped} more like it in the last {self.window_s:.0f} s)"
            record.args = ()
        return True


# librdkafka warnings about a step it retries by itself until it succeeds, which a user cannot act on: the
# idempotent producer's "Failed to acquire idempotence PID ... retrying" while a new destination's coordinator
# loads. A lasting failure still surfaces as the produce call's own error.
_SELF_RETRIED = re.compile(r"^GETPID\b.*\bretrying\b", re.DOTALL)


class SelfRetriedFilter(logging.Filter):
    """Logs librdkafka's warnings of a step it retries itself (``_SELF_RETRIED``) at INFO, not WARNING."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self._logger = logger

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and _SELF_RETRIED.search(record.getMessage()):
            record.levelno, record.levelname = logging.INFO, "INFO"
            return self._logger.isEnabledFor(logging.INFO)
        return True


def librdkafka_logger() -> logging.Logger:
    """The logger every kafka-ferry client hands to confluent-kafka (config key ``logger``)."""
    logger = logging.getLogger(LOGGER_NAME)
    if not any(isinstance(f, SelfRetriedFilter) for f in logger.filters):
        logger.addFilter(SelfRetriedFilter(logger))
    if not any(isinstance(f, RepeatFilter) for f in logger.filters):
        logger.addFilter(RepeatFilter())
    return logger
