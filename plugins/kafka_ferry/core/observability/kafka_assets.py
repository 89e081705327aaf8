"""What a migration tells Airflow about its topics: Asset URIs, OpenLineage names, asset-event extras, metric names.

Pure (no Airflow, Kafka or Spark): the Airflow edge (``airflow_native/``) turns these into Assets, lineage and
StatsD calls. Every name here is built from data (a connection's ``bootstrap.servers``, a topic, a migration
name), so each is validated and bounded before it reaches Airflow's metadata database or a metric name.

Naming, as Airflow's Kafka provider and OpenLineage's naming spec give it:

- a topic's Asset URI is ``kafka://<host:port>/<topic>``, where ``host:port`` is the cluster's *first* bootstrap
  address (the provider's ``create_asset``); a downstream DAG schedules on exactly that string.
- a topic's OpenLineage dataset is namespace ``kafka://<host:port>`` and name ``<topic>``.
- a mirror topic names its source topic (namespace of the source cluster) in a symlinks facet: the catalogue then
  shows that ``orders`` on the new cluster continues ``orders`` on the old one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kafka_ferry.core.common.failures import Retryable

# Kafka's own rule for a topic name (kafka.common.internals.Topic): legal characters, at most 249.
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
# A host: DNS name or IPv4 (letters, digits, dots, hyphens, underscores), or an IPv6 literal in brackets.
_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")
DEFAULT_PORT = 9092
# An asset event's extra lives in the metadata DB: per-partition offsets are kept up to this many partitions per
# topic, beyond it the event carries the totals only (a 2,000-partition topic must not make a megabyte row).
MAX_PARTITIONS_IN_EXTRA = 256
MIGRATION_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,79}")


class AssetNameError(Retryable, ValueError):
    """A bootstrap address or topic name that cannot name an Asset or a lineage dataset."""


def first_address(bootstrap_servers: str | None) -> str:
    """``host:port`` of the first ``bootstrap.servers`` entry (``[proto://]host[:port]``; the port defaults to 9092).

    Why the first: the Kafka provider names a topic by one server, and every task and DAG of a deployment reads the
    same connection, so the same address names the same topic everywhere.
    """
    entries = [e.strip() for e in (bootstrap_servers or "").split(",") if e.strip()]
    if not entries:
        raise AssetNameError("bootstrap.servers is empty: a topic asset needs the cluster's address")
    entry = entries[0].split("://", 1)[-1]
    if entry.startswith("["):
        host, _, rest = entry.partition("]")
        host, port = host + "]", rest.removeprefix(":") if rest else ""
        if rest and not rest.startswith(":"):
            raise AssetNameError(f"bootstrap address {entries[0]!r}: expected [ipv6]:port")
    else:
        host, sep, port = entry.rpartition(":")
        if not sep:
            host, port = entry, ""
    if not _HOST.fullmatch(host):
        raise AssetNameError(f"bootstrap address {entries[0]!r}: host {host!r} is not a host name or address")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise AssetNameError(f"bootstrap address {entries[0]!r}: port {port!r} is not 1-65535")
    # the host as the connection spells it (no case folding): a downstream DAG writes the URI from the same text
    return f"{host}:{int(port) if port else DEFAULT_PORT}"


def check_topic(topic: str) -> str:
    if not isinstance(topic, str) or not TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        raise AssetNameError(f"topic {topic!r} is not a Kafka topic name ([A-Za-z0-9._-], 1-249 characters)")
    return topic


def lineage_namespace(bootstrap_servers: str | None) -> str:
    """The OpenLineage namespace of a Kafka cluster: ``kafka://<host:port>``."""
    return f"kafka://{first_address(bootstrap_servers)}"


def topic_asset_uri(bootstrap_servers: str | None, topic: str) -> str:
    """The Asset URI of a topic: ``kafka://<first bootstrap host:port>/<topic>`` (the Kafka provider's form)."""
    return f"{lineage_namespace(bootstrap_servers)}/{check_topic(topic)}"


def _migration(name: str) -> str:
    if not MIGRATION_NAME.fullmatch(name or ""):
        raise AssetNameError(f"migration name {name!r} cannot name an asset alias")
    return name


def copied_alias(migration: str) -> str:
    """The asset alias a migration's catch-up copy task adds its topics' events through."""
    return f"kafka-ferry/{_migration(migration)}/copied"


def promoted_alias(migration: str) -> str:
    """The asset alias a migration's promotion tasks add their topics' promoted events through."""
    return f"kafka-ferry/{_migration(migration)}/promoted"


def copy_event_extras(migration: str, batch_id: str, partitions: Iterable[Mapping[str, Any]]
                      ) -> dict[str, dict[str, Any]]:
    """Destination topic -> the extra of its asset event, for the topics a batch wrote records to.

    ``partitions`` are the batch report's rows. A topic whose partitions copied nothing gets no event: a
    downstream DAG is woken by new data only. ``offsets``: partition -> [first copied, next] source offsets.
    """
    by_topic: dict[str, dict[str, Any]] = {}
    for row in partitions:
        copied = int(row.get("records_copied") or 0)
        if copied <= 0:
            continue
        topic = check_topic(row["destination_topic"])
        extra = by_topic.setdefault(topic, {"migration": migration, "batch_id": batch_id, "kind": "copied",
                                            "source_topic": check_topic(row["source_topic"]), "records": 0,
                                            "bytes": 0, "offsets": {}})
        extra["records"] += copied
        extra["bytes"] += int(row.get("bytes_copied") or 0)
        extra["offsets"][str(int(row["partition"]))] = [int(row["start_offset"]), int(row["next_upstream_offset"])]
    for extra in by_topic.values():
        _bound_offsets(extra)
    return by_topic


def promotion_event_extra(migration: str, source_topic: str, cutover: Mapping[int, tuple[int, int | None]],
                          run_id: str, promoted_at_ms: int | None = None) -> dict[str, Any]:
    """The extra of a promoted topic's event: the migration, and per partition the cutover offsets
    ``[next source offset copied, next destination offset]`` (where producers and consumers continue)."""
    extra: dict[str, Any] = {"migration": migration, "kind": "promoted", "promoted": True,
                             "source_topic": check_topic(source_topic), "run_id": str(run_id)[:250],
                             "offsets": {str(int(p)): [int(s), None if d is None else int(d)]
                                         for p, (s, d) in sorted(cutover.items())}}
    if promoted_at_ms is not None:
        extra["promoted_at_ms"] = int(promoted_at_ms)
    return _bound_offsets(extra)


def _bound_offsets(extra: dict[str, Any]) -> dict[str, Any]:
    offsets = extra["offsets"]
    if len(offsets) > MAX_PARTITIONS_IN_EXTRA:
        extra["partitions"] = len(offsets)
        extra["offsets"] = dict(sorted(offsets.items(), key=lambda kv: int(kv[0]))[:MAX_PARTITIONS_IN_EXTRA])
        extra["offsets_truncated"] = True
    return extra


def is_promotion_event(extra: Mapping[str, Any] | None) -> bool:
    """True for the event a promotion emits (a downstream post-cutover check ignores the catch-up copies')."""
    return extra is not None and extra.get("kind") == "promoted" and extra.get("promoted") is True
