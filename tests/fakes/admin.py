"""The admin calls of ``kafka_ferry.kafka.acls`` on a ``FakeCluster``: ACLs, and what the cluster's principal may do.

``FakeCluster.admin`` answers the few ``confluent_kafka.admin.AdminClient`` calls that module makes (describe, create,
delete ACLs; KIP-430 authorized operations of topics and groups; a validate-only CreateTopics) with futures, as the
client does, deciding as Kafka's ``StandardAuthorizer`` does (``test_fakes_contract.py`` checks it on the test bed's
SASL listener):

- a super user (no authorizer, or a principal in ``super_users``) may do everything;
- otherwise a DENY matching the operation (or ALL) wins, then an ALLOW of the operation, of ALL, or of an
  operation that implies it (READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS);
- CREATE of a topic is allowed by CREATE on the topic or on the CLUSTER (``kafka-cluster``).
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, NewTopic

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.kafka.acls import from_binding, to_binding

if TYPE_CHECKING:
    from fakes.cluster import FakeCluster

OPERATIONS = {"TOPIC": ("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS",
                        "ALTER_CONFIGS"),
              "GROUP": ("READ", "DESCRIBE", "DELETE"),
              "CLUSTER": ("CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                          "IDEMPOTENT_WRITE")}
IMPLIED_BY = {"DESCRIBE": ("READ", "WRITE", "DELETE", "ALTER"), "DESCRIBE_CONFIGS": ("ALTER_CONFIGS",)}
CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True)
class Description:
    """What a describe answers (name, KIP-430 operations) for a topic or group."""

    name: str
    authorized_operations: list[AclOperation] | None


def _done(value: Any = None, error: int | None = None) -> Future:
    future: Future = Future()
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(KafkaException(KafkaError(error)))
    return future


def _name(value: object) -> str:
    """An enum member's name (the client's filter fields are typed enum, str or int)."""
    return str(getattr(value, "name", value))


def _matches(f: AclBindingFilter, e: AclEntry) -> bool:
    """Kafka's filter match: ANY (or None) matches every value, else the value must be equal."""
    restype = "CLUSTER" if _name(f.restype) == "BROKER" else _name(f.restype)
    pattern = _name(f.resource_pattern_type)
    return ((restype == "ANY" or restype == e.resource_type)
            and (f.name is None or f.name == e.resource_name
                 or (pattern == "MATCH" and e.covers(e.resource_type, f.name)))
            and (pattern in ("ANY", "MATCH") or pattern == e.pattern_type)
            and (f.principal is None or f.principal == e.principal)
            and (f.host is None or f.host == e.host)
            and (_name(f.operation) == "ANY" or _name(f.operation) == e.operation)
            and (_name(f.permission_type) == "ANY" or _name(f.permission_type) == e.permission))


class FakeAdmin:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    # --- the authorizer -------------------------------------------------------------------------
    def allowed(self, resource_type: str, name: str, operation: str) -> bool:
        c = self.cluster
        if not c.authorizer or c.principal in c.super_users:
            return True
        mine = [e for e in c.acls if e.principal in (c.principal, "User:*") and e.covers(resource_type, name)]
        if any(e.permission == "DENY" and e.operation in (operation, "ALL") for e in mine):
            return False
        granting = (operation, "ALL", *IMPLIED_BY.get(operation, ()))
        return any(e.permission == "ALLOW" and e.operation in granting for e in mine)

    def _operations(self, resource_type: str, name: str) -> list[AclOperation]:
        return [AclOperation[op] for op in OPERATIONS[resource_type] if self.allowed(resource_type, name, op)]

    # --- the AdminClient calls kafka.acls makes -------------------------------------------------
    def describe_topics(self, topics: TopicCollection, request_timeout: float = 30,
                        include_authorized_operations: bool = False) -> dict[str, Future]:
        out = {}
        self.cluster.requests += [("describe_topics", name) for name in topics.topic_names]
        for name in topics.topic_names:
            if name not in self.cluster.topics:
                out[name] = _done(error=KafkaError.UNKNOWN_TOPIC_OR_PART)
            elif not self.allowed("TOPIC", name, "DESCRIBE"):
                out[name] = _done(error=KafkaError.TOPIC_AUTHORIZATION_FAILED)
            else:
                ops = self._operations("TOPIC", name) if include_authorized_operations else None
                out[name] = _done(Description(name, ops))
        return out

    def describe_consumer_groups(self, group_ids: Iterable[str], request_timeout: float = 30,
                                 include_authorized_operations: bool = False) -> dict[str, Future]:
        out = {}
        self.cluster.requests += [("describe_groups", name) for name in group_ids]
        for name in group_ids:
            if not self.allowed("GROUP", name, "DESCRIBE"):
                out[name] = _done(error=KafkaError.GROUP_AUTHORIZATION_FAILED)
            else:
                ops = self._operations("GROUP", name) if include_authorized_operations else None
                out[name] = _done(Description(name, ops))
        return out

    def create_topics(self, new_topics: list[NewTopic], validate_only: bool = False,
                      request_timeout: float = 30) -> dict[str, Future]:
        out = {}
        for topic in new_topics:
            name = topic.topic
            self.cluster.requests.append(("validate_create" if validate_only else "create_topic", name))
            if not (self.allowed("TOPIC", name, "CREATE") or self.allowed("CLUSTER", CLUSTER_NAME, "CREATE")):
                out[name] = _done(error=KafkaError.TOPIC_AUTHORIZATION_FAILED)
            elif name in self.cluster.topics:
                out[name] = _done(error=KafkaError.TOPIC_ALREADY_EXISTS)
            else:
                if not validate_only:
                    self.cluster.create_topic(name, topic.num_partitions, max(1, topic.replication_factor), {})
                out[name] = _done(None)
        return out

    def describe_cluster(self, request_timeout: float = 30, include_authorized_operations: bool = False) -> Future:
        # Kafka answers the cluster's operations only to a principal that may DESCRIBE it (KafkaApis
        # handleDescribeCluster: 0 otherwise, which the client gives as None)
        described = include_authorized_operations and self.allowed("CLUSTER", CLUSTER_NAME, "DESCRIBE")
        ops = self._operations("CLUSTER", CLUSTER_NAME) if described else None
        return _done(Description(CLUSTER_NAME, ops))

    def describe_acls(self, acl_filter: AclBindingFilter, request_timeout: float = 30) -> Future:
        if not self.allowed("CLUSTER", CLUSTER_NAME, "DESCRIBE"):
            return _done([])  # as the real brokers answer a principal without DESCRIBE on the cluster: no error
        return _done([to_binding(e) for e in self.cluster.acls if _matches(acl_filter, e)])

    def create_acls(self, bindings: list[AclBinding], request_timeout: float = 30) -> dict[AclBinding, Future]:
        out = {}
        for binding in bindings:
            entry = from_binding(binding)
            error = self.cluster.acl_create_errors.get(entry)
            if error is not None:
                out[binding] = _done(error=error)
                continue
            if entry not in self.cluster.acls:
                self.cluster.acls.append(entry)
            out[binding] = _done(None)
        return out

    def delete_acls(self, filters: list[AclBindingFilter], request_timeout: float = 30
                    ) -> dict[AclBindingFilter, Future]:
        out = {}
        for f in filters:
            gone = [e for e in self.cluster.acls if _matches(f, e)]
            self.cluster.acls[:] = [e for e in self.cluster.acls if e not in gone]
            out[f] = _done([to_binding(e) for e in gone])
        return out
