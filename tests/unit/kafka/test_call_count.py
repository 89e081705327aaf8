"""kafka.call_count: what the fleet bench reports as a phase's cluster calls."""

from __future__ import annotations

from kafka_ferry.kafka import call_count


class _Client:
    """A stand-in client recording what reached it (the proxy must pass every call through unchanged)."""

    version = "1.0"

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def list_offsets(self, request, **kwargs):
        self.seen.append(("list_offsets", request, kwargs))
        return {"answer": request}

    def poll(self, timeout):
        self.seen.append(("poll", timeout))
        return None

    def _private(self):
        return "private"


def test_public_calls_are_counted_per_kind_and_method_and_pass_through():
    client = _Client()
    counted = call_count.Counted(client, "admin", skip=call_count.ADMIN_LOCAL)
    before = call_count.snapshot()
    assert counted.list_offsets({"t": 1}, isolation_level=2) == {"answer": {"t": 1}}
    assert counted.list_offsets({"t": 2}) == {"answer": {"t": 2}}
    assert client.seen == [("list_offsets", {"t": 1}, {"isolation_level": 2}), ("list_offsets", {"t": 2}, {})]
    assert call_count.since(before) == {"admin.list_offsets": 2}


def test_skipped_methods_attributes_and_private_names_are_not_counted():
    client = _Client()
    counted = call_count.Counted(client, "consumer", skip=call_count.FETCH_LOOP | {"poll"})
    before = call_count.snapshot()
    counted.poll(0.1)
    assert counted.version == "1.0" and counted._private() == "private"
    assert client.seen == [("poll", 0.1)]
    assert call_count.since(before) == {}


def test_since_reports_only_what_changed_after_the_snapshot():
    call_count.record("admin.describe_cluster")
    before = call_count.snapshot()
    call_count.record("consumer.create")
    call_count.record("consumer.create")
    assert call_count.since(before) == {"consumer.create": 2}
    assert call_count.snapshot()["admin.describe_cluster"] >= 1
