"""What operators and sensors share, below both: the migration a task works for, and fail-fast failures.

Failures a retry cannot heal fail the task at once; the others keep the task's retries.
Why: a task's retries (30 s apart) only help what waiting can fix. An invalid spec, a missing or
mistyped connection, a refusal by the cluster (ACL, credentials, policy, invalid config) or by the
pre-flight (no bootstrap address reachable, a selection matching nothing, provisioning refused, records lost to
retention, migration already promoted) give the same
answer on every try, so the run should stop on the first, with the message, in seconds. Timeouts,
unreachable brokers, coordinator loading and leader changes stay ordinary exceptions: they may heal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from functools import cached_property
from typing import Any, TypeVar

from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.core.specs.spec import MigrationSpec, load_spec
from kafka_ferry.hooks.kafka_cluster import kafka_cluster
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.state.store import MigrationStateStore


class MigrationContext:
    """The spec (a YAML path, re-read at run time) and the clusters and state of the migration it names.

    Shared by operators and sensors; clients are created lazily, on first use in the task.
    """

    spec_path: str

    @cached_property
    def spec(self) -> MigrationSpec:
        return load_spec(self.spec_path)

    @cached_property
    def source_cluster(self) -> KafkaCluster:
        return kafka_cluster(self.spec.source.connection_id)

    @cached_property
    def destination_cluster(self) -> KafkaCluster:
        return kafka_cluster(self.spec.destination.connection_id)

    @cached_property
    def state_store(self) -> MigrationStateStore:
        return MigrationStateStore(self.destination_cluster, self.spec.state_topic_name)


# Airflow's own exceptions cannot declare ``Permanent``: the one foreign type read here. AirflowNotFoundException:
# a connection the task looks up is not defined (hooks raise it on first use).
DETERMINISTIC = (AirflowNotFoundException,)

F = TypeVar("F", bound=Callable[..., Any])


def is_deterministic(exc: BaseException) -> bool:
    """True when trying again cannot change the outcome: the exception declares it (``core.common.failures``)."""
    return retry_cannot_help(exc) or isinstance(exc, DETERMINISTIC)


def fail_fast(method: F) -> F:
    """Wrap a task method (execute, poke, ...) so a deterministic failure fails the task without retry."""

    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except AirflowFailException:
            raise
        except Exception as exc:
            if is_deterministic(exc):
                raise AirflowFailException(str(exc)) from exc
            raise

    return run  # type: ignore[return-value]
