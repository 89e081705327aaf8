"""ACL and SCRAM-user calls on a cluster's AdminClient, for `core.acls.acl_plan.AclEntry` values.

Functions over a ``KafkaCluster`` (its `admin` AdminClient; errors name the cluster).
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kafka_ferry.core.acls.acl_plan import CLUSTER_RESOURCE, AclEntry
from kafka_ferry.kafka.errors import KafkaClusterError

TIMEOUT_S = 30.0


def _resource_type(name: str) -> ResourceType:
    """Kafka names the cluster resource CLUSTER (as AclEntry does); confluent-kafka's enum calls it BROKER."""
    return ResourceType.BROKER if name == "CLUSTER" else ResourceType[name]


def to_binding(entry: AclEntry) -> AclBinding:
    return AclBinding(_resource_type(entry.resource_type), entry.resource_name,
                      ResourcePatternType[entry.pattern_type], entry.principal, entry.host,
                      AclOperation[entry.operation], AclPermissionType[entry.permission])


def from_binding(binding: AclBinding) -> AclEntry:
    # a binding the broker describes holds its enums; confluent-kafka's stubs also admit the str and int a
    # constructor accepts (a stub gap)
    resource_type = "CLUSTER" if binding.restype == ResourceType.BROKER else binding.restype.name  # type: ignore[union-attr]
    return AclEntry(binding.principal, resource_type, binding.name, binding.operation.name,  # type: ignore[union-attr]
                    binding.permission_type.name, binding.resource_pattern_type.name,  # type: ignore[union-attr]
                    binding.host)


def _filter(resource_type: str = "ANY", name: str | None = None, principal: str | None = None,
            pattern_type: str = "ANY", operation: str = "ANY", permission: str = "ANY") -> AclBindingFilter:
    # None matches any name, principal or host (Kafka's filter); confluent-kafka's stubs type them str (a stub gap)
    return AclBindingFilter(_resource_type(resource_type), name, ResourcePatternType[pattern_type], principal, None,  # type: ignore[arg-type]
                            AclOperation[operation], AclPermissionType[permission])


# What each ACL call needs of the cluster resource (an authorization error names the grant): listing ACLs needs
# DESCRIBE on the cluster, creating or deleting them ALTER
DESCRIBE_ACLS_NEEDS = {"CLUSTER": ("DESCRIBE", CLUSTER_RESOURCE)}
ALTER_ACLS_NEEDS = {"CLUSTER": ("ALTER", CLUSTER_RESOURCE)}


def _result(cluster, future, operation: str, acl=None):
    try:
        return future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        raise KafkaClusterError.on(cluster, operation, exc.args[0], acl=acl) from None


def describe_acls(cluster, resource_type: str = "ANY", name: str | None = None,
                  principal: str | None = None, pattern_type: str = "ANY") -> list[AclEntry]:
    """The ACLs matching the filter (pattern_type MATCH: every pattern that covers `name`)."""
    future = cluster.admin.describe_acls(_filter(resource_type, name, principal, pattern_type),
                                         request_timeout=TIMEOUT_S)
    return sorted(from_binding(b) for b in _result(cluster, future, "describe ACLs", DESCRIBE_ACLS_NEEDS))


class AclsPartlyCreated(KafkaClusterError):
    """``create_acls`` failed for an entry; ``created`` holds the entries the cluster did accept, so a caller that
    records what it owns records exactly those (and nothing that was not created)."""

    created: tuple[AclEntry, ...] = ()


def create_acls(cluster, entries: Iterable[AclEntry]) -> list[AclEntry]:
    """Create the entries (creating an existing ACL is a no-op for Kafka: idempotent); returns those the cluster
    accepted. Every entry's answer is awaited; when one failed, ``AclsPartlyCreated`` names the first failure and
    carries the entries that were created."""
    bindings = [to_binding(e) for e in sorted(set(entries))]
    if not bindings:
        return []
    created: list[AclEntry] = []
    failed: tuple[AclEntry, KafkaError] | None = None
    for binding, future in cluster.admin.create_acls(bindings, request_timeout=TIMEOUT_S).items():
        entry = from_binding(binding)
        try:
            future.result(timeout=TIMEOUT_S)
        except KafkaException as exc:
            failed = failed or (entry, exc.args[0])
            continue
        created.append(entry)
    if failed is not None:
        error = AclsPartlyCreated.on(cluster, f"create ACL {failed[0].describe()}", failed[1], acl=ALTER_ACLS_NEEDS)
        error.created = tuple(sorted(created))
        raise error
    return sorted(created)


def delete_acls(cluster, entries: Iterable[AclEntry]) -> None:
    """Delete exactly these entries (a filter with every field set matches one ACL)."""
    filters = [AclBindingFilter(*_exact(e)) for e in sorted(set(entries))]
    if not filters:
        return
    for _, future in cluster.admin.delete_acls(filters, request_timeout=TIMEOUT_S).items():
        _result(cluster, future, "delete ACLs", ALTER_ACLS_NEEDS)


def _exact(entry: AclEntry) -> tuple:
    b = to_binding(entry)
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)


def upsert_scram_user(cluster, username: str, password: str, mechanism: str = "SCRAM_SHA_512",
                      iterations: int = 8192) -> None:
    """Create or reset a SCRAM user (Kafka keeps only the salted hash)."""
    upsertion = UserScramCredentialUpsertion(username, ScramCredentialInfo(ScramMechanism[mechanism], iterations),
                                             password.encode())
    futures = cluster.admin.alter_user_scram_credentials([upsertion], request_timeout=TIMEOUT_S)
    for future in futures.values():
        _result(cluster, future, f"upsert SCRAM user {username}")


# --- what the connection's own principal may do (no ACL listing needed: KIP-430) -----------------------

def authorized_operations(cluster, resource_type: str, names: Iterable[str]) -> dict[str, set[str] | None]:
    """Per existing topic or group, the operations the connection's principal may do on it, as the broker's
    authorizer answers (KIP-430: needs only DESCRIBE on the resource, not the ACL listing). A topic that does not
    exist is left out; None: the broker did not say (no authorizer answer). Reads only."""
    names = sorted(set(names))
    if not names:
        return {}
    if resource_type == "TOPIC":
        existing = set(cluster.list_topic_names())  # once: inside the filter it was a metadata request per name
        names = [n for n in names if n in existing]
        futures = cluster.admin.describe_topics(TopicCollection(names), request_timeout=TIMEOUT_S,
                                                include_authorized_operations=True) if names else {}
    else:
        futures = cluster.admin.describe_consumer_groups(names, request_timeout=TIMEOUT_S,
                                                         include_authorized_operations=True)
    out: dict[str, set[str] | None] = {}
    for name, future in sorted(futures.items()):
        try:
            ops = future.result(timeout=TIMEOUT_S).authorized_operations
        except KafkaException as exc:
            raise KafkaClusterError.on(cluster, f"describe {resource_type.lower()} {name}", exc.args[0],
                                       acl={resource_type: ("DESCRIBE", name)}) from None
        out[name] = None if ops is None else {op.name for op in ops}
    return out


def cluster_operations(cluster) -> set[str] | None:
    """The operations the connection's principal may do on the cluster resource, as the authorizer answers
    (KIP-430, DescribeCluster); None when the broker did not list them, which Kafka does only for a principal that
    may DESCRIBE the cluster (KafkaApis.handleDescribeCluster answers 0 to any other): None means no DESCRIBE.
    Reads only.

    Why ask: a DescribeAcls by a principal without DESCRIBE on the cluster is answered with an empty list, no error
    (Kafka 3.9 and 4.x of the test bed), so a caller that lists ACLs cannot tell "none" from "not allowed to see"."""
    future = cluster.admin.describe_cluster(request_timeout=TIMEOUT_S, include_authorized_operations=True)
    ops = _result(cluster, future, "describe cluster").authorized_operations
    return None if ops is None else {op.name for op in ops}


def may_create_topic(cluster, name: str) -> str | None:
    """None when the principal may create ``name`` (a validate-only CreateTopics: nothing is created), else the
    broker's refusal. A topic that exists already answers TOPIC_ALREADY_EXISTS only to a principal allowed to
    create it, so that counts as allowed."""
    future = cluster.admin.create_topics([NewTopic(name, 1, 1)], validate_only=True,
                                         request_timeout=TIMEOUT_S)[name]
    try:
        future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0]
        if error.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED):
            return error.str()
    return None  # allowed; or refused for another reason (replication factor...) the real create reports
