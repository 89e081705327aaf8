"""The source's Kafka Streams applications this migration touches, read from the source (core.units.streams_apps says
what an application holds; this reads the names and committed offsets it needs). Read-only."""

from __future__ import annotations

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.core.units import streams_apps
from kafka_ferry.kafka import streams_groups
from kafka_ferry.kafka.cluster import KafkaCluster


class ApplicationSplit(Permanent, ValueError):
    """The spec's selection would take part of a Streams application; the same on every try (the names decide)."""


class StreamsGroupUnseen(Permanent, RuntimeError):
    """A group the migration needs has committed offsets on the source but the client library cannot list or
    describe it (a KIP-1071 streams group); the same on every try, until the group's type changes."""


def unseen_groups(spec: MigrationSpec, source: KafkaCluster, topics: list[str], groups: list[str]) -> list[str]:
    """Groups this migration would move that the client's group listing does not show although they have committed
    offsets: a named application's group, or the group whose internal topics the spec selects (its id: a prefix of
    the topic's name at a '-'). librdkafka does not list KIP-1071 streams groups (Kafka 4.2+) and describes them as
    Dead and empty while their application runs; their committed offsets it reads right."""
    listed = set(groups)
    candidates = {a for a in spec.declared_applications if a not in listed}
    for topic in select_topics(spec, topics):
        if topic.endswith(streams_apps.INTERNAL_SUFFIXES) and streams_apps.owner(topic, listed) is None:
            parts = topic.split("-")
            candidates |= {"-".join(parts[:n]) for n in range(1, len(parts) - 1)} - listed
    if not candidates:
        return []
    return sorted(g for g, offsets in source.groups_offsets(sorted(candidates)).items() if offsets)


def source_applications(spec: MigrationSpec, source: KafkaCluster) -> list[streams_apps.StreamsApplication]:
    """The applications the spec names and those detected on the source, with their topics (one listing of the
    source's topics and groups, one read of the applications' committed offsets; for streams groups, their
    topology's input topics too, when Kafka's Java Admin is configured). Refuses (``StreamsGroupUnseen``)
    when an application's group has committed offsets but the client cannot see it (a KIP-1071 streams group):
    its members could not be checked, so nothing of it may move."""
    topics, groups = source.list_topic_names(), source.list_group_ids()
    hidden = unseen_groups(spec, source, topics, groups)
    if hidden:
        raise StreamsGroupUnseen(
            f"migration {spec.name!r}: nothing was changed: group(s) {', '.join(hidden)} have committed offsets on "
            "the source, but the client library neither lists nor describes them: KIP-1071 streams groups "
            "(group.protocol=streams, Kafka 4.2+), whose members kafka-ferry cannot see, so it could move the "
            "application while it still runs. Let kafka-ferry describe them with Kafka's Java Admin (set "
            f"{streams_groups.CLASSPATH_ENV} to kafka-clients jars of 4.1 or later, with a JDK, on the workers; "
            "a warning above says why it failed if it is set), move the application under a classic group "
            "(group.protocol=classic), or leave its topics out of the migration")
    declared = spec.declared_applications
    ids = sorted({*declared, *streams_apps.detect(groups, topics)})
    offsets = source.groups_offsets([g for g in ids if g in set(groups)]) if ids else {}
    committed = {g: {t for t, _ in tps} for g, tps in offsets.items()}
    # a streams group's topology names its input topics, those it has not committed on yet too (kafka.streams_groups)
    for g, seen in source.streams_group_topology([g for g in ids if g in set(groups)]).items():
        committed[g] = committed.get(g, set()) | {t for t in seen.source_topics if t in set(topics)}
    return streams_apps.applications(declared, groups, topics, committed)


def check_applications(spec: MigrationSpec, source: KafkaCluster) -> list[streams_apps.StreamsApplication]:
    """The applications this migration selects (whole); refuses, naming each, a selection that takes part of one."""
    apps = source_applications(spec, source)
    if not apps:
        return []
    source_topics = source.list_topic_names()
    selected_topics = select_topics(spec, source_topics)
    selected_groups = [g for g in source.list_group_ids() if spec.selects_group(g)]
    problems = streams_apps.selection_problems(apps, selected_topics, selected_groups, source_topics)
    if problems:
        raise ApplicationSplit(f"migration {spec.name!r}: nothing was changed: " + "; ".join(problems))
    chosen = set(selected_topics)
    taken = [a for a in apps if a.declared or any(t in chosen for t in a.topics)]
    if taken and spec.topics.rename.policy != "identity":  # named ones are refused by the spec check already
        raise ApplicationSplit(
            f"migration {spec.name!r}: nothing was changed: topics.rename.policy {spec.topics.rename.policy!r} "
            f"renames the topics of {', '.join(a.reason for a in taken)}; Streams finds its changelog and "
            "repartition topics by its application.id, so a renamed changelog would restore no state: use policy "
            "identity, or leave the application's topics out")
    return taken
