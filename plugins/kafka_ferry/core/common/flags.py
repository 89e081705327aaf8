"""The one string-to-bool parser for operator flags (templated params arrive as strings)."""

from __future__ import annotations

from typing import Any

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off", ""})


def parse_bool(value: Any) -> bool:
    """True/False, "true"/"True"/"1"/"yes"/"on" → True; "false"/"0"/"no"/"off"/""/None → False; else ValueError."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError(f"not a boolean flag: {value!r} (use true/false, 1/0, yes/no or on/off)")
