"""How a registry's refusals reach the task: 401/403 fail in one try, an outage keeps the task's retries.

A real HTTP server on loopback answers every request with one status; the client under test is the one the
stage uses (confluent-kafka's SchemaRegistryClient for reads, httpx for the calls it lacks).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kafka_ferry.registry.client import (
    RegistryConnection,
    RegistryUrlRefused,
    SchemaRegistry,
    SchemaRegistryRefused,
    SchemaRegistryUnavailable,
)


@pytest.fixture
def answering():
    servers = []

    def start(status: int) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                body = b'{"error_code": %d, "message": "nope"}' % (status * 100 + 1)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_PUT = do_POST = do_GET  # noqa: N815

            def log_message(self, *_args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("call", ["subjects", "set_mode"])
def test_a_refusal_is_permanent_and_names_registry_operation_and_status(answering, status, call):
    registry = SchemaRegistry(RegistryConnection("sr_dst", answering(status), basic_auth=("svc", "s3cret")))
    with pytest.raises(SchemaRegistryRefused) as err:
        registry.subjects() if call == "subjects" else registry.set_mode("orders-value", "IMPORT")
    registry.close()
    message = str(err.value)
    assert message.startswith(f"schema registry 'sr_dst' ({registry.conn.url}): ")
    assert f"refused with HTTP {status}: check the connection's credentials" in message
    assert "s3cret" not in message


def test_an_outage_stays_retriable(answering):
    registry = SchemaRegistry(RegistryConnection("sr_dst", answering(503)))
    with pytest.raises(SchemaRegistryUnavailable) as err:
        registry.subjects()
    registry.close()
    assert not isinstance(err.value, SchemaRegistryRefused)
    assert "sr_dst" in str(err.value)


def test_a_connection_with_user_info_in_its_url_cannot_be_made(answering):
    """Whatever builds it (the hook, a test, a CLI), a registry URL never carries a secret into an error: the
    connection is refused before any call, and the refusal does not quote the URL (issue #36 case 5)."""
    url = answering(503).replace("http://", "http://svc:hunter2-pw@")
    with pytest.raises(RegistryUrlRefused) as err:
        RegistryConnection("sr_dst", url)
    assert str(err.value) == ("schema registry 'sr_dst': the URL has a user part (user:password@); credentials go "
                              "in the connection's login/password (or Extra bearer_token), never in the URL")
    assert "hunter2" not in str(err.value)


def test_an_outage_with_basic_auth_names_the_url_without_the_secret(answering, caplog):
    registry = SchemaRegistry(RegistryConnection("sr_dst", answering(503), basic_auth=("svc", "hunter2-pw")))
    with caplog.at_level("DEBUG"), pytest.raises(SchemaRegistryUnavailable) as err:
        registry.subjects()
    registry.close()
    assert f"({registry.conn.url})" in str(err.value)
    assert "hunter2" not in str(err.value) and "hunter2" not in caplog.text
