"""The one error type for failed Kafka calls, free of Airflow so the Spark job raises it too.

Executors import kafka_ferry without Airflow (importing it costs seconds per Python worker), so this
module depends on confluent-kafka only. The message names the connection (or cluster role), the
bootstrap addresses tried, the operation and what to check, and never the rest of the client config,
which may hold credentials.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from confluent_kafka import KafkaError

from kafka_ferry.core.acls.acl_plan import grant_hint_for_code
from kafka_ferry.core.common.failures import KafkaFerryError

_ADVICE = {
    KafkaError._TRANSPORT: "the cluster is unreachable: check bootstrap.servers and the network",
    KafkaError._TIMED_OUT: "the cluster did not answer in time: check bootstrap.servers and that brokers are up",
    KafkaError._ALL_BROKERS_DOWN: "no broker answers: check bootstrap.servers",
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "the connection's principal lacks a topic ACL",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "the connection's principal lacks a group ACL",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "the connection's principal lacks a cluster ACL",
    KafkaError.SASL_AUTHENTICATION_FAILED: "authentication failed: check the SASL settings of the connection",
    KafkaError._AUTHENTICATION: "authentication failed: check the connection's SASL username, password and mechanism",
    KafkaError._SSL: "the TLS handshake failed: check security.protocol and ssl.ca.location of the connection",
    KafkaError.UNKNOWN_TOPIC_OR_PART: "the topic does not exist",
    KafkaError.INVALID_REPLICATION_FACTOR: "the cluster has fewer brokers than the replication factor",
    KafkaError.POLICY_VIOLATION: "a broker-side create/alter policy rejected the request",
}

# The cluster refused the request as it is configured (ACLs, credentials, policies, invalid settings):
# the same request gets the same answer after any wait. Everything else (timeouts, unreachable brokers,
# coordinator loading, leader changes) may heal and keeps the task's retries.
PERMANENT_CODES = frozenset({
    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError.DELEGATION_TOKEN_AUTHORIZATION_FAILED, KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError._AUTHENTICATION, KafkaError.UNSUPPORTED_SASL_MECHANISM, KafkaError.ILLEGAL_SASL_STATE,
    KafkaError.POLICY_VIOLATION, KafkaError.INVALID_CONFIG, KafkaError.INVALID_REPLICATION_FACTOR,
    KafkaError.INVALID_PARTITIONS, KafkaError.TOPIC_EXCEPTION, KafkaError.UNSUPPORTED_VERSION,
    KafkaError._INVALID_ARG,
})


def bootstrap_addresses(servers: str | None) -> str:
    """The host:port list of a bootstrap.servers value, without any user part (`user@host` -> `host`)."""
    return ",".join(s.strip().rsplit("@", 1)[-1] for s in (servers or "").split(",") if s.strip())


class KafkaClusterError(KafkaFerryError, RuntimeError):
    """A Kafka call failed; the message names the connection, the addresses tried, the operation and what to check.

    ``permanent`` says the cluster refused as configured: retrying the task cannot help. ``acl``: resource type
    -> (ACL operation, resource name) the call needs; an authorization error then names what to grant to
    ``principal``.
    """

    permanent = False  # decided per instance, from the error code (PERMANENT_CODES)

    def __init__(self, connection_id: str, operation: str, error: KafkaError | Exception,
                 bootstrap_servers: str | None = None, *, principal: str | None = None,
                 acl: Mapping[str, tuple[str, str]] | None = None):
        code = error.code() if isinstance(error, KafkaError) else None
        reason = error.str() if isinstance(error, KafkaError) else str(error)
        advice = _ADVICE.get(code, "") if code is not None else ""
        hint = grant_hint_for_code(code, principal, acl)
        if hint:
            advice = f"{advice}: {hint}"
        self.code = code
        self.permanent = code in PERMANENT_CODES
        addresses = bootstrap_addresses(bootstrap_servers)
        where = f" (bootstrap servers {addresses})" if addresses else ""
        super().__init__(f"Kafka connection '{connection_id}'{where}: {operation} failed: {reason}"
                         + (f" ({advice})" if advice else ""))

    @classmethod
    def on(cls, cluster: Any, operation: str, error: KafkaError | Exception,
           acl: Mapping[str, tuple[str, str]] | None = None) -> Self:
        """The error of a call on a ``KafkaCluster``: named by its connection id (or role) and bootstrap addresses, and
        for an authorization error by the grant its principal needs (``acl``)."""
        return cls(cluster.name, operation, error, getattr(cluster, "bootstrap_servers", None),
                   principal=getattr(cluster, "principal", None), acl=acl)


class ClusterUnreachableError(KafkaClusterError):
    """No bootstrap address of a connection accepts a TCP connection (the pre-flight's probe).

    Deterministic for the run (``permanent``): every address refused or did not answer before any Kafka request
    was made, so the task's retries, seconds apart, would only repeat it. Names the connection, the addresses and
    each one's reason, never the rest of the config.
    """

    def __init__(self, connection_id: str, reasons: Mapping[str, str]):
        RuntimeError.__init__(self, (
            f"Kafka connection '{connection_id}' (bootstrap servers {','.join(reasons)}): no bootstrap address "
            "accepts a connection (" + "; ".join(f"{a}: {r}" for a, r in reasons.items()) + "): check the "
            "host and port of bootstrap.servers in the connection's Extra, and that the brokers are up and "
            "reachable from this worker; nothing was changed"))
        self.code = KafkaError._TRANSPORT
        self.permanent = True


class ListenerProtocolError(KafkaClusterError):
    """A connection set for PLAINTEXT reaches a listener that speaks TLS or wants SASL (the pre-flight's probe).

    Deterministic (``permanent``): the listener's protocol will not change between retries. Without this the
    client reconnects until its request times out and says only "timed out". Names the connection, the address
    and the setting to change, never the rest of the config.
    """

    ADVICE = {"TLS": "it answers with TLS: set security.protocol to SSL (or SASL_SSL with the SASL settings) in the "
                     "connection's Extra, or use the brokers' PLAINTEXT port",
              "SASL": "it wants SASL authentication: set security.protocol to SASL_PLAINTEXT with sasl.mechanism, "
                      "sasl.username and sasl.password in the connection's Extra, or use the brokers' PLAINTEXT "
                      "port"}

    def __init__(self, connection_id: str, address: str, speaks: str):
        RuntimeError.__init__(self, (
            f"Kafka connection '{connection_id}' (bootstrap servers {address}): the connection uses PLAINTEXT, but "
            f"the listener at {address} is not a PLAINTEXT listener: {self.ADVICE[speaks]}; nothing was changed"))
        self.code = KafkaError._TRANSPORT
        self.permanent = True
        self.speaks = speaks
