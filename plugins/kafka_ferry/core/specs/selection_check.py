"""Refuse a selection that selects nothing: a typo in `topics.include` must not be a green, empty run.

Why: a spec whose include matches no topic (``nu.event`` for ``nu.events``) gave an empty pre-flight diff,
"0 partitions" and a successful run, so the typo was noticed, if ever, at cutover. The pre-flight refuses
it, naming the patterns, how many names there were and the closest ones (difflib), unless the spec says
an empty selection is intended (``allow_empty: true``). Groups are checked only when the spec selects them
itself: the default (every group with offsets on the migrated topics) may rightly be none.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.specs.spec import MigrationSpec, Selection

CLOSEST = 3


class EmptySelection(Permanent, ValueError):
    """The spec's selection matched nothing on the source; the same on every try (deterministic)."""


def _literal(pattern: str) -> str:
    """A regex as the name it most likely spells (``nu\\.event`` -> ``nu.event``), for the closeness measure."""
    return re.sub(r"\\(.)", r"\1", pattern)


def closest(patterns: Sequence[str], names: Iterable[str], n: int = CLOSEST) -> list[str]:
    """The names most like any of the patterns, best first, at most ``n``."""
    names = sorted(set(names))
    scored: dict[str, float] = {}
    for pattern in patterns:
        literal = _literal(pattern)
        for name in difflib.get_close_matches(literal, names, n=n, cutoff=0.6):
            score = difflib.SequenceMatcher(None, literal, name).ratio()
            scored[name] = max(score, scored.get(name, 0.0))
    return sorted(scored, key=lambda name: (-scored[name], name))[:n]


def empty_selection_problem(section: str, selection: Selection, names: Sequence[str], what: str) -> str | None:
    """Why ``selection`` (the spec's ``section``) selects none of ``names`` (``what``: "source topics"), or None
    when it selects one or the spec allows an empty selection."""
    if getattr(selection, "allow_empty", False) or any(selection.matches(n) for n in names):
        return None
    include = list(selection.include)
    included = [n for n in names if any(re.fullmatch(p, n) for p in include)]
    head = f"{section}.include {include!r} matched {len(included)} of {len(names)} {what}"
    if included:
        return (f"{head}, and {section}.exclude {list(selection.exclude)!r} excluded all of them; "
                f"set {section}.allow_empty: true if an empty selection is intended")
    near = closest(include, names)
    return (f"{head}; closest: {', '.join(near) if near else '(none alike)'}; "
            f"set {section}.allow_empty: true if an empty selection is intended")


def check_selections(spec: MigrationSpec, source_topics: Sequence[str], source_groups: Sequence[str]) -> None:
    """Raise ``EmptySelection`` naming every empty selection of the spec (topics; groups when the spec sets them)."""
    topics = [t for t in source_topics if not t.startswith("__")]  # Kafka-internal topics are never migrated
    problems = [empty_selection_problem("topics", spec.topics, topics, "source topics")]
    if "groups" in spec.model_fields_set:
        problems.append(empty_selection_problem("groups", spec.groups, list(source_groups), "source groups"))
    refused = [p for p in problems if p]
    if refused:
        raise EmptySelection(f"migration {spec.name!r}: nothing selected, nothing was changed: " + "; ".join(refused))
