"""How ``KafkaCluster`` waits for the AdminClient: in slices, ending at once on errors no wait can cure.

An admin call returns a future; librdkafka reports connection-level errors (authentication, TLS, brokers
down) only through ``error_cb``. Waiting in short slices and polling in between lets a failed login end the
call at once with its real cause instead of a timeout, and lets a timeout say what the client saw last.
Transient coordinator and leader errors (a broker restart, a leader change) are retried a few times.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from kafka_ferry.kafka.errors import KafkaClusterError

log = logging.getLogger(__name__)

# Group coordinator moves and loads (after a broker start or a leader change) pass within seconds.
RETRIABLE_CODES = frozenset({
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
    # a restarted broker answers with a stale leader epoch until its metadata catches up
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH,
})
RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 4.0)
WAIT_SLICE_S = 0.5
SLICE_RETRY_CODES = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT})
# Connection errors no wait can cure: the call fails at once, saying so.
FATAL_CLIENT_CODES = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
                                KafkaError._SSL})


class AdminWaits:
    """Waiting on ``self.admin``'s futures within ``self.request_timeout_s``; errors name ``self`` (a cluster)."""

    admin: Any
    request_timeout_s: float
    _client_error: KafkaError | None = None

    def _on_client_error(self, error: KafkaError) -> None:
        """librdkafka's connection-level errors (authentication, brokers down): they explain a call's timeout,
        and an authentication failure ends the wait at once (waiting longer cannot fix credentials)."""
        self._client_error = error

    def _wait(self, future: Future, operation: str, acl: Mapping[str, tuple[str, str]] | None = None) -> Any:
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            try:
                return future.result(timeout=min(WAIT_SLICE_S, max(0.0, deadline - time.monotonic())))
            except KafkaException as exc:
                raise KafkaClusterError.on(self, operation, exc.args[0], acl=acl) from None
            except TimeoutError:
                self.admin.poll(0)  # serves error_cb
                last = self._client_error
                if last is not None and last.code() in FATAL_CLIENT_CODES:
                    raise KafkaClusterError.on(self, operation, last) from None
                if time.monotonic() >= deadline:
                    detail = f"; last client error: {last.str()}" if last is not None else ""
                    timed_out = KafkaError(KafkaError._TIMED_OUT,
                                           f"no answer within {self.request_timeout_s:g} s{detail}")
                    raise KafkaClusterError.on(self, operation, timed_out) from None

    def _retrying(self, call: Callable[[], Any]) -> Any:
        """Run a call again while it fails with a transient coordinator/leader error."""
        for delay in RETRY_DELAYS_S:
            try:
                return call()
            except KafkaClusterError as exc:
                if exc.code not in RETRIABLE_CODES:
                    raise
                log.info("transient Kafka error, retrying in %.1f s: %s", delay, exc)
                time.sleep(delay)
        return call()

    def _wait_all(self, futures: Mapping[Any, Future], operation: str,
                  acl: Callable[[Any], Mapping[str, tuple[str, str]]] | None = None) -> dict[Any, Any]:
        return {key: self._wait(f, f"{operation} {key}", acl(key) if acl else None) for key, f in futures.items()}

    def _metadata(self, operation: str) -> Any:
        """Cluster metadata (every topic the principal may describe), asked in slices so an authentication
        failure (reported through error_cb) ends the wait at once."""
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            try:
                return self.admin.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
            except KafkaException as exc:
                self.admin.poll(0)
                last = self._client_error
                if last is not None and last.code() in FATAL_CLIENT_CODES:
                    raise KafkaClusterError.on(self, operation, last) from None
                if time.monotonic() >= deadline or exc.args[0].code() not in SLICE_RETRY_CODES:
                    raise KafkaClusterError.on(self, operation, exc.args[0]) from None
