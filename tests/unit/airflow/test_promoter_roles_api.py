"""A task reads a promoter's roles through the auth manager's REST API (issue 42): the FAB auth manager's login and
user endpoints, with the credentials of the ``kafka_ferry_auth_api`` connection. Here a small HTTP server on an
ephemeral loopback port answers as FAB's routes do (``POST /auth/token``, ``GET /auth/fab/v1/users/<name>``);
``tests/e2e/test_tenant_roles.py`` does it against the real API server. Every answer that does not give the roles
leaves them unread with the reason, and a user listed only through a role is then refused naming it, never
allowed; the password is in no message and no log line."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest

from kafka_ferry.core.cutover.authority import NotAllowed, check_authority
from kafka_ferry.core.specs.tenants import Promoters
from kafka_ferry.core.specs.trigger_form import PROMOTE
from kafka_ferry.operators import authority
from kafka_ferry.operators.authority import AUTH_API_CONN_ID, actor, api_user_roles

LOGIN, PASSWORD = "role-reader", "s3cret-reader-pw"
USERS = {"carol": {"username": "carol", "active": True, "roles": [{"name": "acme-cutover"}, {"name": "Viewer"}]},
         "dave": {"username": "dave", "active": False, "roles": [{"name": "acme-cutover"}]},
         "bob": {"username": "bob", "active": True, "roles": [{"name": "Viewer"}]},
         "ann o'neil": {"username": "ann o'neil", "active": True, "roles": []}}
PROMOTERS = Promoters(users=("alice",), roles=("acme-cutover",))


class FabApi(BaseHTTPRequestHandler):
    """FAB's two routes as the task uses them; ``server.reader_forbidden``: the token's user may not read users."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet: no access log on stderr
        return

    def _answer(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/auth/token" and (body.get("username"), body.get("password")) == (LOGIN, PASSWORD):
            self._answer(201, {"access_token": "token-1"})
        else:
            self._answer(401, {"detail": "Invalid credentials"})

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        prefix = "/auth/fab/v1/users/"
        if self.headers.get("Authorization") != "Bearer token-1":
            self._answer(401, {"detail": "Not authenticated"})
        elif getattr(self.server, "reader_forbidden", False):
            self._answer(403, {"detail": "Forbidden"})
        elif self.path.startswith(prefix) and unquote(self.path[len(prefix):]) in USERS:
            self._answer(200, USERS[unquote(self.path[len(prefix):])])
        else:
            self._answer(404, {"detail": "User not found"})


def blocked_orm(user: str) -> None:
    """The metadata DB as a task worker sees it in Airflow 3: closed, the roles unknown there."""
    return None


@pytest.fixture(autouse=True)
def worker(monkeypatch) -> None:
    """As in a task worker: the roles come from the API, not from the metadata DB (the CLI's way)."""
    monkeypatch.setattr(authority, "db_user_roles", blocked_orm)


@pytest.fixture
def api() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FabApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def connect(monkeypatch, server: ThreadingHTTPServer, login: str = LOGIN, password: str = PASSWORD) -> None:
    host, port = server.server_address[:2]
    monkeypatch.setenv(f"AIRFLOW_CONN_{AUTH_API_CONN_ID.upper()}", json.dumps(
        {"conn_type": "http", "host": host, "port": port, "schema": "http", "login": login, "password": password}))


def test_a_users_roles_are_read_through_the_api_and_a_listed_role_allows(api, monkeypatch, caplog):
    connect(monkeypatch, api)
    caplog.set_level(logging.INFO)
    assert api_user_roles("carol", AUTH_API_CONN_ID) == (("Viewer", "acme-cutover"), "")
    assert api_user_roles("ann o'neil", AUTH_API_CONN_ID) == ((), "")  # a name quoted into the path
    assert api_user_roles("nobody", AUTH_API_CONN_ID) == ((), "")  # unknown: no role
    asking = actor("carol", "manual", PROMOTERS)
    check_authority(PROMOTE, "acme-orders", "acme", PROMOTERS, asking)  # allowed by her role
    with pytest.raises(NotAllowed, match=r"user 'bob' \(roles \['Viewer'\]\) is not one of tenant 'acme''s"):
        check_authority(PROMOTE, "acme-orders", "acme", PROMOTERS, actor("bob", "manual", PROMOTERS))
    assert "read through the auth manager's API" in caplog.text and PASSWORD not in caplog.text


@pytest.mark.parametrize("case, why", [
    ("no-connection", f"no Airflow connection '{AUTH_API_CONN_ID}' to the auth manager's API"),
    ("bad-password", f"connection '{AUTH_API_CONN_ID}''s user '{LOGIN}' could not log in to http://127.0.0.1:"),
    ("forbidden", f"connection '{AUTH_API_CONN_ID}''s user '{LOGIN}' may not read users at http://127.0.0.1:"),
    ("inactive", "user 'dave' is inactive in the auth manager"),
    ("down", "the auth manager's API at http://127.0.0.1:"),
])
def test_roles_that_cannot_be_read_refuse_a_user_listed_by_role_naming_why(api, monkeypatch, case, why):
    user = "dave" if case == "inactive" else "carol"
    if case != "no-connection":
        connect(monkeypatch, api, password="wrong-pw" if case == "bad-password" else PASSWORD)
    api.reader_forbidden = case == "forbidden"
    if case == "down":
        api.shutdown()
        api.server_close()
    roles, unread = api_user_roles(user, AUTH_API_CONN_ID)
    assert roles is None and why in unread, unread
    with pytest.raises(NotAllowed) as refused:
        check_authority(PROMOTE, "acme-orders", "acme", PROMOTERS, actor(user, "manual", PROMOTERS))
    assert f"its roles could not be read: {why}" in str(refused.value), str(refused.value)
    assert PASSWORD not in str(refused.value) and "wrong-pw" not in str(refused.value)


def test_a_user_listed_by_name_needs_no_role_lookup(monkeypatch):
    monkeypatch.delenv(f"AIRFLOW_CONN_{AUTH_API_CONN_ID.upper()}", raising=False)
    asking = actor("alice", "manual", PROMOTERS)
    assert asking.roles is None and asking.unread == ""  # no connection needed: the list names her
    check_authority(PROMOTE, "acme-orders", "acme", PROMOTERS, asking)
