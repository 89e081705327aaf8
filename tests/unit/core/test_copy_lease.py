"""The copy lease decision: the earliest live claim wins, every reader past its own claim agrees, expiry is final."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_ferry.core.batches.copy_lease import Claim, claims_in_log, holder, refusal
from kafka_ferry.core.common.state_records import LEASE_KIND


def claim(token: str, expires_at_ms: int = 10_000, host: str = "h1", pid: int = 1, claim_offset=None) -> Claim:
    return Claim(token=token, migration="orders", batch_id=f"b-{token}", host=host, pid=pid, pid_started="7",
                 claimed_at_ms=1_000, expires_at_ms=expires_at_ms, claim_offset=claim_offset)


def held(claims: Iterable[Claim], now_ms: int, is_dead: Callable[[Claim], bool] = lambda _c: False) -> Claim:
    """The holder, in a case where some claim holds."""
    found = holder(claims, now_ms, is_dead)
    assert found is not None
    return found


def rec(offset: int, c: Claim | None, token: str | None = None) -> tuple[int, bytes, bytes | None]:
    if not token:
        assert c is not None  # a withdrawal names its token
        token = c.token
    key = f"{LEASE_KIND}/{token}".encode()
    return offset, key, None if c is None else c.to_json()


def test_earliest_claim_wins_and_other_kinds_are_ignored():
    log = [(0, b"progress/t:0", b'{"x": 1}'), rec(1, claim("b")), rec(2, claim("a")), (3, b"batch/x", None)]
    claims = claims_in_log(log)
    assert [(c.token, c.claim_offset) for c in claims] == [("b", 1), ("a", 2)]
    assert held(claims, now_ms=5_000).token == "b"


def test_a_withdrawn_claim_releases_the_lease():
    log = [rec(1, claim("a")), rec(2, claim("b")), rec(3, None, token="a")]
    assert held(claims_in_log(log), now_ms=5_000).token == "b"


def test_an_expired_claim_does_not_hold_and_expiry_is_exclusive():
    log = [rec(1, claim("a", expires_at_ms=5_000)), rec(2, claim("b", expires_at_ms=9_000))]
    assert held(claims_in_log(log), now_ms=4_999).token == "a"
    assert held(claims_in_log(log), now_ms=5_000).token == "b"
    assert holder(claims_in_log(log), now_ms=9_000) is None


def test_a_dead_process_does_not_hold():
    log = [rec(1, claim("a", pid=11)), rec(2, claim("b", pid=12))]
    assert held(claims_in_log(log), 5_000, is_dead=lambda c: c.pid == 11).token == "b"


def test_a_renewal_keeps_the_claim_offset_even_when_compaction_removed_the_first_record():
    # "a" claimed at offset 1; compaction kept only its renewal at 9, written after "b" claimed at 5.
    renewed = replace(claim("a", expires_at_ms=20_000), claim_offset=1)
    claims = claims_in_log([rec(5, claim("b")), rec(9, renewed)])
    assert held(claims, now_ms=5_000).token == "a"


def test_a_renewal_without_claim_offset_keeps_the_first_records_offset():
    log = [rec(1, claim("a")), rec(2, claim("b")), rec(3, claim("a", expires_at_ms=30_000))]
    claims = claims_in_log(log)
    assert {c.token: c.claim_offset for c in claims} == {"a": 1, "b": 2}
    assert claims[0].expires_at_ms == 30_000


def test_refusal_names_the_holder():
    message = refusal(claim("mine" * 8), claim("theirs" * 6, host="worker-3", pid=4242))
    assert "worker-3/pid 4242" in message and "batch b-theirs" in message and "copied nothing" in message
    assert "another copy is running" in message


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcde"), st.sampled_from(["claim", "withdraw"])), min_size=1,
                max_size=20),
       st.data())
def test_every_claimant_that_read_past_its_claim_agrees_on_one_holder(events, data):
    """Any interleaving of claims and withdrawals: all live claimants reading the same log pick the same holder.

    A claimant reads the log from the start to (at least) its own claim: any prefix that contains it. The
    holder it computes is the earliest live claim in that prefix, which no later record can change: so two
    claimants that both consider themselves holders cannot exist.
    """
    log: list[tuple[int, bytes, bytes | None]] = []
    first: dict[str, int] = {}
    for token, action in events:
        offset = len(log)
        if action == "claim":
            first.setdefault(token, offset)
            log.append(rec(offset, claim(token)))
        elif token in first:
            first.pop(token)
            log.append(rec(offset, None, token=token))
    winners = set()
    for token, offset in first.items():  # every claimant still live at the end reads to some point past its claim
        end = data.draw(st.integers(min_value=offset + 1, max_value=len(log)))
        h = holder(claims_in_log([r for r in log if r[0] < end]), now_ms=5_000)
        if h is not None and h.token == token:
            winners.add(token)
    assert len(winners) <= 1
    if first:  # read to the end, the log names the earliest claim not withdrawn
        assert held(claims_in_log(log), now_ms=5_000).token == min(first, key=first.__getitem__)
