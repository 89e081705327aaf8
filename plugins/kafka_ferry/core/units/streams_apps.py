"""Kafka Streams applications as one unit: which topics and which group belong to an application.

Why: a Streams application reads its input topics under its ``application.id`` group, keeps its state in compacted
``<application.id>-<store>-changelog`` topics and reshuffles through ``<application.id>-<name>-repartition`` topics;
under ``exactly_once_v2`` it writes output, changelog, repartition records and its offsets in one transaction.
Moving part of it (the group without its changelog, the input topic without the group) corrupts its state or its
output, silently. So an application is selected, provisioned and promoted as a whole, and a staged step that
would split it is refused: ``StreamsApplication.unit`` makes it a ``core.units.coupling.CoupledUnit``, and the one split
check every unit goes through refuses it (this module only says what an application holds).

An application is named in the spec (``applications: [{application_id: ...}]``) or detected: a source group
``G`` with a topic ``G-<name>-changelog`` or ``G-<name>-repartition`` on the source is a Streams application
(Streams names its internal topics so and nothing else does). Its input topics are the topics its group has
committed offsets on, less its own repartition topics (which it reads too). Its output topics cannot be seen from
names: the spec names them.

Pure: the callers read names and committed offsets from the source and hand them in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafka_ferry.core.units.coupling import CoupledUnit

CHANGELOG_SUFFIX = "-changelog"
REPARTITION_SUFFIX = "-repartition"
INTERNAL_SUFFIXES = (CHANGELOG_SUFFIX, REPARTITION_SUFFIX)
REASON = "Kafka Streams application {}"


def _internal_name(application_id: str, topic: str) -> bool:
    """``topic`` is ``<application_id>-<something>-changelog`` or ``...-repartition`` (a non-empty middle part)."""
    prefix = f"{application_id}-"
    if not topic.startswith(prefix):
        return False
    rest = topic[len(prefix):]
    return any(rest.endswith(suffix) and len(rest) > len(suffix) for suffix in INTERNAL_SUFFIXES)


def owner(topic: str, application_ids: Iterable[str]) -> str | None:
    """The application whose internal topic ``topic`` is, or None. With ids that prefix each other (``wc`` and
    ``wc-eu``), the longest that fits owns it: ``wc-eu-counts-changelog`` is ``wc-eu``'s store ``counts``, not
    ``wc``'s store ``eu-counts``."""
    fitting = [a for a in application_ids if _internal_name(a, topic)]
    return max(fitting, key=len) if fitting else None


def internal_topics(application_id: str, topics: Iterable[str],
                    application_ids: Iterable[str] = ()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The application's (changelog, repartition) topics among ``topics``, each sorted. ``application_ids`` are
    the other applications known, so that one whose id extends this one keeps its own topics."""
    known = {application_id, *application_ids}
    mine = sorted(t for t in set(topics) if owner(t, known) == application_id)
    return (tuple(t for t in mine if t.endswith(CHANGELOG_SUFFIX)),
            tuple(t for t in mine if t.endswith(REPARTITION_SUFFIX)))


def detect(group_ids: Iterable[str], topics: Iterable[str]) -> list[str]:
    """The groups that are Streams applications by their topics' names, sorted."""
    groups = set(group_ids)
    topics = [t for t in set(topics) if t.endswith(INTERNAL_SUFFIXES)]
    return sorted(g for g in groups if any(owner(t, groups) == g for t in topics))


@dataclass(frozen=True)
class StreamsApplication:
    """One application and everything that moves with it."""

    application_id: str
    input_topics: tuple[str, ...] = ()
    changelog_topics: tuple[str, ...] = ()
    repartition_topics: tuple[str, ...] = ()
    output_topics: tuple[str, ...] = ()
    declared: bool = False  # named in the spec (else detected from names)

    @property
    def group(self) -> str:
        return self.application_id

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({*self.input_topics, *self.changelog_topics, *self.repartition_topics,
                             *self.output_topics}))

    @property
    def reason(self) -> str:
        return REASON.format(self.application_id)

    def unit(self) -> CoupledUnit:
        """The application as a coupled unit (``core.units.coupling``): a staged step moving part of it is refused by
        the one split check every unit goes through. Named by its application id, which ``coupling.accept_split``
        names to accept a split."""
        return CoupledUnit(self.application_id, frozenset(self.topics), frozenset({self.group}), self.reason)

    def describe(self) -> str:
        """One line for the pre-flight and the dry run."""
        how = "named in the spec" if self.declared else "detected from its topic names"
        parts = [f"{label} {', '.join(names) if names else '(none)'}" for label, names in (
            ("input", self.input_topics), ("changelog", self.changelog_topics),
            ("repartition", self.repartition_topics), ("output", self.output_topics))]
        return f"{self.reason} ({how}): group {self.group}; " + "; ".join(parts)


def applications(declared: Mapping[str, Sequence[str]], group_ids: Iterable[str], topics: Iterable[str],
                 committed: Mapping[str, Iterable[str]]) -> list[StreamsApplication]:
    """Every application: those the spec names (``declared``: id -> output topics) and those detected among
    ``group_ids``, with their topics among the source's ``topics``; ``committed`` is group -> topics it has
    committed offsets on (the input topics come from there). Sorted by id."""
    topics = sorted(set(topics))
    ids = sorted({*declared, *detect(group_ids, topics)})
    out = []
    for app in ids:
        changelogs, repartitions = internal_topics(app, topics, ids)
        inputs = tuple(sorted(set(committed.get(app, ())) - set(repartitions)))
        out.append(StreamsApplication(app, inputs, changelogs, repartitions,
                                      tuple(sorted(set(declared.get(app, ())))), app in declared))
    return out


def selection_problems(apps: Iterable[StreamsApplication], selected_topics: Iterable[str],
                       selected_groups: Iterable[str], source_topics: Iterable[str]) -> list[str]:
    """Why the migration's selection would take part of an application (some of its topics selected, not all, or
    not its group; a named application is always taken), one line per application naming what is left out; or a
    declared application whose output topic does not exist on the source. Empty when every application is selected
    whole or not at all."""
    topics, groups, existing = set(selected_topics), set(selected_groups), set(source_topics)
    problems = []
    for app in apps:
        missing_outputs = [t for t in app.output_topics if t not in existing]
        if missing_outputs:
            problems.append(f"{app.reason}: output topic(s) {', '.join(missing_outputs)} named in the spec "
                            "(applications.output_topics) are not on the source")
        if not app.declared and not any(t in topics for t in app.topics):
            # a detected application none of whose topics is selected is not this migration's (its group matching
            # the default groups.include '.*' takes nothing: a group moves only with offsets on migrated topics)
            continue
        left = [f"topic {t}" for t in app.topics if t not in topics]
        if app.group not in groups:
            left.append(f"group {app.group}")
        if left:
            problems.append(f"{app.reason} would be split: the selection leaves out {', '.join(left)}; an "
                            "application moves whole: select them (topics.include / groups.include) or leave the "
                            "application out")
    return problems
