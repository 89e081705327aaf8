"""Read the transaction coordinator's log (``__transaction_state``) of a cluster, when its principal may.

Why here: the log is an internal topic; reading it is an ordinary assigned read (``kafka.reads``, no group join,
no commit) of every partition from its log start to its end, decoded by ``core.units.transaction_log``. A principal
without DESCRIBE on the topic does not see it in the metadata at all, and one without READ is refused the
fetch: both are answers ("the log could not be read", and why), not failures, so the pre-flight can say it and
fall back on the units the spec declares. Anything else (a timeout, a broker down) is the ordinary retryable
``KafkaClusterError``: a pre-flight that cannot see the couplings must not pass as if there were none.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_ferry.core.units.transaction_log import TRANSACTION_STATE_TOPIC, TransactionLogReading, read_transaction_log
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.kafka.reads import read_whole_partitions


@dataclass(frozen=True)
class TransactionLogAnswer:
    """The reading, or why there is none (``refused``: the cluster's answer, naming the ACL to grant)."""

    reading: TransactionLogReading | None
    refused: str | None = None


def read_transaction_state(cluster: KafkaCluster) -> TransactionLogAnswer:
    """Every record ``__transaction_state`` still holds, folded into the topics each transactional.id wrote.

    Not listed in the metadata: no transactional producer ever ran there, or the principal may not DESCRIBE the
    topic; the answer says both, as the cluster does not tell them apart."""
    partitions = cluster.partitions_of([TRANSACTION_STATE_TOPIC])
    if not partitions:
        return TransactionLogAnswer(None, (
            f"{TRANSACTION_STATE_TOPIC} is not listed on {cluster.name}: no transactional producer has run there, or "
            f"the principal {cluster.principal or '(anonymous)'} may not DESCRIBE it"))
    try:
        reading = read_transaction_log((m.key(), m.value()) for m in read_whole_partitions(
            cluster, partitions, read_committed=False))
    except KafkaClusterError as exc:
        if exc.permanent:  # refused as configured (an ACL): the same read is refused again
            return TransactionLogAnswer(None, str(exc))
        raise
    return TransactionLogAnswer(reading)
