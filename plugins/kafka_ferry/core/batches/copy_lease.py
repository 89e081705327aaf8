"""Who holds a migration's copy lease, decided from the claims in its state topic (pure).

Why a lease in the state topic: Airflow's ``max_active_runs=1`` only serializes runs of one DAG; a copy
job started by hand (spark-submit, a CLI, another Airflow) of the same migration would copy the same
partitions concurrently, and two copiers writing one destination partition duplicate records. The state
topic is the one place every copy job of a migration already reads and writes, and it has one partition,
so its offsets totally order the claims.

The protocol (compare-and-set by offset): a job writes a claim ``copy-lease/<token>`` and learns its offset
from the delivery report, then reads the topic to its end. Among the *live* claims (no tombstone, not
expired, not held by a process known dead) the one with the lowest claim offset holds the lease; every
other claimant withdraws (tombstones its claim) and fails naming the holder. Two claimants that race both
see both claims once each has read past its own, so they agree on the winner.

Renewals rewrite the same key with a later ``expires_at_ms`` and carry the original ``claim_offset``, so
compaction of the first record never moves a claim later in the order. A holder that misses its own
expiry never renews again (a later claimant may already hold the lease): expiry is final.
Expiry compares wall clocks of different hosts: they must agree to well under the lease duration (NTP).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.common.state_records import LEASE_KIND

# Airflow retries copy_batch after 30 s (the DAG's retry_delay): a crashed holder's lease has expired by then.
LEASE_S = 30.0
RENEW_EVERY_S = 5.0


class CopyLeaseHeld(Retryable, RuntimeError):
    """Another copy job of this migration holds the lease; the message names it."""


@dataclass(frozen=True)
class Claim:
    token: str
    migration: str
    batch_id: str
    host: str
    pid: int
    pid_started: str  # the process's start time as the OS reports it: a reused pid is another process
    claimed_at_ms: int
    expires_at_ms: int
    claim_offset: int | None = None  # the offset of the first claim record; None until it is known

    @property
    def key(self) -> str:
        return LEASE_KIND.record_key(self.token).decode()

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> Claim:
        value = json.loads(raw)
        return cls(**{k: value[k] for k in cls.__dataclass_fields__ if k in value})

    def describe(self) -> str:
        return (f"copy job {self.host}/pid {self.pid} (batch {self.batch_id}, lease {self.token[:8]}, claimed at "
                f"{self.claimed_at_ms} ms, expires at {self.expires_at_ms} ms unless renewed)")


def claims_in_log(records: Iterable[tuple[int, bytes, bytes | None]]) -> list[Claim]:
    """The current claim of every lease key in state-topic records ``(offset, key, value)``, in offset order.

    A tombstone withdraws a claim. A claim without ``claim_offset`` is ordered by its first record's offset.
    """
    current: dict[str, Claim] = {}
    first_offset: dict[str, int] = {}
    for offset, raw_key, raw_value in records:
        kind, _, token = raw_key.decode().partition("/")
        if kind != LEASE_KIND.name:
            continue
        if raw_value is None:
            current.pop(token, None)
            first_offset.pop(token, None)
            continue
        claim = Claim.from_json(raw_value)
        first_offset.setdefault(token, offset)
        if claim.claim_offset is None:
            claim = Claim(**{**asdict(claim), "claim_offset": first_offset[token]})
        current[token] = claim
    return sorted(current.values(), key=lambda c: (c.claim_offset, c.token))


def holder(claims: Iterable[Claim], now_ms: int, is_dead: Callable[[Claim], bool] = lambda _c: False) -> Claim | None:
    """The earliest live claim, or None when every claim has expired, was withdrawn or its process is gone."""
    live = [c for c in claims if c.expires_at_ms > now_ms and not is_dead(c)]
    return min(live, key=lambda c: (c.claim_offset, c.token), default=None)


def refusal(mine: Claim, winner: Claim) -> str:
    """The message of a claimant that lost to ``winner``."""
    return (f"migration {mine.migration}: another copy is running: {winner.describe()}. Batch {mine.batch_id} "
            f"copied nothing. Wait for it to finish; a crashed job's lease expires {LEASE_S:g} s after its last "
            f"renewal (or at once when its process is gone from this host)")
