"""The one error type for failed Kafka calls, apart from the Airflow hook so the Spark job can raise it too.

Executors import kafka_ferry without Airflow (importing it costs seconds per Python worker), so this
module depends on confluent-kafka only. The message names the connection (or cluster role), the
operation and what to check, and never the client config, which may hold credentials.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

_ADVICE = {
    KafkaError._TRANSPORT: "the cluster is unreachable: check bootstrap.servers and the network",
    KafkaError._TIMED_OUT: "the cluster did not answer in time: check bootstrap.servers and that brokers are up",
    KafkaError._ALL_BROKERS_DOWN: "no broker answers: check bootstrap.servers",
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "the connection's principal lacks a topic ACL",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "the connection's principal lacks a group ACL",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "the connection's principal lacks a cluster ACL",
    KafkaError.SASL_AUTHENTICATION_FAILED: "authentication failed: check the SASL settings of the connection",
    KafkaError.UNKNOWN_TOPIC_OR_PART: "the topic does not exist",
    KafkaError.INVALID_REPLICATION_FACTOR: "the cluster has fewer brokers than the replication factor",
    KafkaError.POLICY_VIOLATION: "a broker-side create/alter policy rejected the request",
}


class KafkaClusterError(RuntimeError):
    """A Kafka call failed; the message names the connection, the operation and what to check."""

    def __init__(self, connection_id: str, operation: str, error: KafkaError | Exception):
        code = error.code() if isinstance(error, KafkaError) else None
        reason = error.str() if isinstance(error, KafkaError) else str(error)
        advice = _ADVICE.get(code, "")
        self.code = code
        super().__init__(f"Kafka connection '{connection_id}': {operation} failed: {reason}"
                         + (f" ({advice})" if advice else ""))
