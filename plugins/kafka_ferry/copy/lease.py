"""The copy lease on the migration's state topic: one copy job per migration at a time, whoever starts it.

Taken once per batch by the job's driver (spark-submit job, in-process copy or the Spark Connect client)
before any record moves, renewed by a daemon thread while the batch runs, withdrawn at the end. The
decision rules are in ``core.batches.copy_lease``; this module writes and reads the claims.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaError

from kafka_ferry.core.batches.copy_lease import (
    LEASE_S,
    RENEW_EVERY_S,
    Claim,
    CopyLeaseHeld,
    claims_in_log,
    holder,
    refusal,
)
from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.common.state_records import StateRecordError
from kafka_ferry.kafka.cluster import KafkaCluster
from kafka_ferry.kafka.errors import KafkaClusterError
from kafka_ferry.kafka.protocol import Cluster
from kafka_ferry.kafka.reads import start_reader

log = logging.getLogger(__name__)
READER_GROUP = "kafka-ferry-state-reader"  # the state store's reader group: no new ACL
TIMEOUT_S = 30.0


class CopyLeaseLost(Retryable, RuntimeError):
    """The lease expired before the holder could renew it: another copy job may have run concurrently."""


def process_started(pid: int) -> str | None:
    """The process's start time (``/proc/<pid>/stat`` field 22), ``""`` without /proc, None when it is gone."""
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").exists():
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            return None
        return None if fields[0] in ("Z", "X") else fields[19]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return ""


def process_gone(claim: Claim) -> bool:
    """A claim of a process on this host that no longer runs (a pid reused since is another process)."""
    return claim.host == socket.gethostname() and process_started(claim.pid) != claim.pid_started


class CopyLease:
    """``with CopyLease(...):`` holds the migration's copy lease or raises ``CopyLeaseHeld`` naming the holder."""

    def __init__(self, destination: Cluster, state_topic: str, migration: str, batch_id: str,
                 lease_s: float = LEASE_S, renew_every_s: float = RENEW_EVERY_S) -> None:
        self.destination, self.topic = destination, state_topic
        self.lease_s, self.renew_every_s = lease_s, renew_every_s
        pid = os.getpid()
        now_ms = _now_ms()
        self.claim = Claim(token=uuid.uuid4().hex, migration=migration, batch_id=batch_id,
                           host=socket.gethostname(), pid=pid, pid_started=process_started(pid) or "",
                           claimed_at_ms=now_ms, expires_at_ms=now_ms + int(lease_s * 1000))
        self.lost = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._producer = destination.producer(**{"acks": "all", "enable.idempotence": True, "linger.ms": 0})

    # --- the protocol -------------------------------------------------------------------------------------
    def acquire(self) -> Claim:
        now_ms = _now_ms()  # the lease runs from its claim, however long ago this object (its producer) was made
        self.claim = Claim(**{**self.claim.__dict__, "claimed_at_ms": now_ms,
                              "expires_at_ms": now_ms + int(self.lease_s * 1000)})
        offset = self._write(self.claim)
        self.claim = Claim(**{**self.claim.__dict__, "claim_offset": offset})
        claims = claims_in_log(self._read_to(offset + 1))
        winner = holder(claims, _now_ms(), process_gone)
        if winner is None or winner.token != self.claim.token:
            self._withdraw()
            if winner is None:  # our own claim expired while the topic was read back: it cannot hold
                raise CopyLeaseHeld(f"migration {self.claim.migration}: the copy lease claim of batch "
                                    f"{self.claim.batch_id} expired before {self.topic} was read back; retry")
            raise CopyLeaseHeld(refusal(self.claim, winner))
        log.info("copy lease %s taken at offset %d of %s (batch %s)", self.claim.token[:8], offset, self.topic,
                 self.claim.batch_id)
        return self.claim

    def renew(self) -> bool:
        """Extend the lease; False (and ``lost``) when it had already expired: expiry is final."""
        if self.lost or _now_ms() >= self.claim.expires_at_ms:
            self.lost = True
            return False
        renewed = Claim(**{**self.claim.__dict__, "expires_at_ms": _now_ms() + int(self.lease_s * 1000)})
        self._write(renewed)
        self.claim = renewed
        return True

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        self._withdraw()

    def __enter__(self) -> CopyLease:
        if self.claim.claim_offset is None:  # not acquired yet (a caller may acquire first to handle a refusal)
            self.acquire()
        self._renewer = threading.Thread(target=self._renew_loop, name="kafka-ferry-copy-lease", daemon=True)
        self._renewer.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        expired = _now_ms() >= self.claim.expires_at_ms  # also when the renewer never got to run in time
        self.release()
        if (self.lost or expired) and exc_type is None:
            raise CopyLeaseLost(
                f"migration {self.claim.migration}: the copy lease of batch {self.claim.batch_id} expired before "
                f"it could be renewed (the job stalled over {self.lease_s:g} s); another copy job may have run "
                "concurrently. Check the batch's records before the next batch")

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.renew_every_s):
            try:
                if not self.renew():
                    log.error("copy lease %s expired before renewal; not renewing", self.claim.token[:8])
                    return
            except KafkaClusterError as exc:  # a broker restart: try again before expiry
                log.warning("copy lease %s not renewed yet: %s", self.claim.token[:8], exc)

    # --- Kafka --------------------------------------------------------------------------------------------
    def _withdraw(self) -> None:
        try:
            self._write(None)
        except KafkaClusterError as exc:  # the lease then ends at its expiry
            log.warning("copy lease %s not withdrawn: %s", self.claim.token[:8], exc)

    def _write(self, claim: Claim | None) -> int:
        """Produce the claim (or a tombstone) and wait for its offset."""
        delivered: list = []
        self._producer.produce(self.topic, key=self.claim.key.encode(), value=None if claim is None else
                               claim.to_json(), partition=0,  # the state topic's one partition, which readers read
                               on_delivery=lambda err, msg: delivered.append((err, msg)))
        self._producer.flush(TIMEOUT_S)
        if not delivered or delivered[0][0] is not None:
            error = delivered[0][0] if delivered else KafkaError(KafkaError._TIMED_OUT, "copy lease claim unsent")
            raise KafkaClusterError.on(self.destination, f"write the copy lease to {self.topic}", error,
                                       acl={"TOPIC": ("WRITE", self.topic)})
        return delivered[0][1].offset()

    def _read_to(self, end: int) -> list[tuple[int, bytes, bytes | None]]:
        """Every record of the state topic below ``end`` (which the caller knows exists), with its offset."""
        consumer = start_reader(self.destination, self.topic, READER_GROUP, enable_eof=False)
        out: list[tuple[int, bytes, bytes | None]] = []
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                for msg in consumer.consume(500, 0.05):  # consume() waits its whole slice for a full batch
                    error, offset, key = msg.error(), msg.offset(), msg.key()
                    if error is not None:
                        raise KafkaClusterError.on(self.destination, f"read the copy lease from {self.topic}",
                                                   error, acl={"TOPIC": ("READ", self.topic),
                                                               "GROUP": ("DESCRIBE", READER_GROUP)})
                    if offset is None or key is None:  # the state store writes every record with its key
                        raise StateRecordError(f"state topic {self.topic}: a record without a key at offset {offset}")
                    if offset < end:
                        out.append((offset, key, msg.value()))
                    if offset + 1 >= end:
                        return out
            raise KafkaClusterError.on(self.destination, f"read the copy lease from {self.topic}",
                                       KafkaError(KafkaError._TIMED_OUT, f"state topic not read to {end} in 60 s"))
        finally:
            consumer.close()


def _now_ms() -> int:
    return int(time.time() * 1000)


def copy_lease(plan, configs, destination: Cluster | None = None) -> CopyLease:
    """The lease a copy job of ``plan`` holds while it copies (its own producer on the destination: a client of its
    own, ``destination``, else one made from ``configs``)."""
    return CopyLease(destination or KafkaCluster("destination", configs["destination"]), plan.state_topic,
                     plan.migration, plan.batch_id)
