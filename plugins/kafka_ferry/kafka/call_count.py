"""A count of the requests kafka-ferry's one client makes, per client kind and method (``bench/fleet.py`` reads it).

Why: "is this phase batched?" is a question about how many cluster calls it makes, and an estimate from reading the
code misses the calls a helper makes for its caller. ``KafkaCluster`` hands out its AdminClient and Consumers
wrapped in ``Counted``, so every admin request and every consumer call other than the fetch loop's own
(``poll``/``consume``, which are reads, not requests a phase chooses to make) is counted. Always on: the cost is one
dict increment under a lock per call.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

_lock = threading.Lock()
_calls: Counter[str] = Counter()

# Consumer methods of the fetch loop: counting them would measure the data, not the phase's requests.
FETCH_LOOP = frozenset({"poll", "consume"})
# AdminClient.poll only serves callbacks (error_cb); it sends nothing.
ADMIN_LOCAL = frozenset({"poll"})


def record(name: str) -> None:
    with _lock:
        _calls[name] += 1


def snapshot() -> Counter[str]:
    """The counts so far (a copy): take one before a phase and ``since`` it after."""
    with _lock:
        return Counter(_calls)


def since(before: Counter[str]) -> dict[str, int]:
    """Calls made since ``before``, per "kind.method", zero counts left out."""
    now = snapshot()
    return {k: now[k] - before.get(k, 0) for k in sorted(now) if now[k] - before.get(k, 0)}


class Counted:
    """``target`` with each public method call counted as "<kind>.<method>" (``skip``: methods not counted)."""

    def __init__(self, target: Any, kind: str, skip: frozenset[str] = frozenset()) -> None:
        self._target, self._kind, self._skip = target, kind, skip

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if name.startswith("_") or name in self._skip or not callable(attr):
            return attr
        label = f"{self._kind}.{name}"

        def counted(*args: Any, **kwargs: Any) -> Any:
            record(label)
            return attr(*args, **kwargs)

        return counted

    def __repr__(self) -> str:
        return f"Counted({self._target!r})"
