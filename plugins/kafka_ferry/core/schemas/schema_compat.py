"""Effective compatibility levels: what a registry enforces for a subject, read the same way on every server.

The level a registry enforces when a new version is registered under a subject is the subject's own level
when one is set, else the global level. Servers answer `GET /config/{subject}` differently for a subject
without its own level (measured):
    Confluent API, AxonOps   40401 "not configured" (the client reads None)
    Apicurio 3.3.3           NONE, unless asked with `defaultToGlobal=true` (then the global level)
So a bare NONE is ambiguous on Apicurio: a subject set to NONE, or a subject that follows a global BACKWARD.
Asked both ways, the answers settle it: a subject whose plain answer differs from its `defaultToGlobal=true`
answer has no level of its own (a set level is returned as it is both ways). When both answers agree the
subject is taken as set: the effective level is the same either way.

Invariants (tests assert each):
  A. `own_level` is None exactly when the registry says the subject follows the global level.
  B. `effective_level` is the own level when set, else the global level.
  C. `mismatches` names every migrated subject whose effective level differs between the two sides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


def own_level(plain: str | None, default_to_global: str | None) -> str | None:
    """The subject's own level from the two answers of `GET /config/{subject}` (None: it follows the global)."""
    if plain is None:
        return None  # "not configured" (Confluent API, AxonOps)
    if default_to_global is not None and default_to_global != plain:
        return None  # Apicurio's NONE for a subject that follows another global level
    return plain


def effective_level(subject_level: str | None, global_level: str | None) -> str | None:
    return subject_level or global_level


@dataclass(frozen=True)
class LevelMismatch:
    source_subject: str
    destination_subject: str
    source: str | None
    destination: str | None

    def __str__(self) -> str:
        return (f"subject {self.destination_subject!r}: effective compatibility {self.destination} on the "
                f"destination, {self.source} on the source ({self.source_subject!r})")


def mismatches(source_levels: Mapping[str, str | None], source_global: str | None,
               destination_levels: Mapping[str, str | None], destination_global: str | None,
               subject_map: Mapping[str, str]) -> list[LevelMismatch]:
    """Per migrated subject (source -> destination name), the effective levels that differ.

    `*_levels` hold each side's own subject levels (None or absent: follows the global level).
    """
    out = []
    for src, dst in sorted(subject_map.items()):
        want = effective_level(source_levels.get(src), source_global)
        got = effective_level(destination_levels.get(dst), destination_global)
        if want is not None and want != got:
            out.append(LevelMismatch(src, dst, want, got))
    return out


def global_line(source_global: str | None, destination_global: str | None, move: bool) -> str:
    """The pre-flight's line on the global level: both sides, and whether the migration moves it."""
    if source_global == destination_global:
        return f"global compatibility: {source_global} on both registries"
    what = ("moved to the destination (schema_registry.move_global_compatibility)" if move else
            "left as it is (the destination's global level is not the migration's; set "
            "schema_registry.move_global_compatibility to move it); migrated subjects without their own level "
            "get the source's effective level as their own")
    return f"global compatibility: source {source_global}, destination {destination_global}: {what}"
