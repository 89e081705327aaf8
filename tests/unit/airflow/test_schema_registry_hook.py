"""The registry a `schema_registry` connection describes, and the field named when it cannot describe one."""

from __future__ import annotations

import pytest

from kafka_ferry.hooks.schema_registry import RegistryConnectionError, registry_connection


def test_a_full_url_in_host_is_used_as_it_is():
    conn = registry_connection("sr", "http://127.0.0.1:8080/apis/ccompat/v7/", 9999, "ignored", None, None, {})
    assert conn.url == "http://127.0.0.1:8080/apis/ccompat/v7"
    assert conn.basic_auth is None and conn.bearer_token is None and conn.timeout_s == 30.0


def test_a_bare_host_gets_https_port_and_path():
    conn = registry_connection("sr", "sr.example", 8081, "/ccompat/", "svc", "s3cret",
                               {"ca_path": "/etc/ca.pem", "timeout_s": "5"})
    assert conn.url == "https://sr.example:8081/ccompat"
    assert conn.basic_auth == ("svc", "s3cret") and conn.ca_path == "/etc/ca.pem" and conn.timeout_s == 5.0
    assert conn.client_config()["basic.auth.user.info"] == "svc:s3cret"
    assert "s3cret" not in repr(conn)


def test_a_bearer_token_goes_to_the_client_and_not_to_repr():
    conn = registry_connection("sr", "https://sr", None, None, None, None, {"bearer_token": "tok-123"})
    assert conn.client_config()["bearer.auth.token"] == "tok-123"
    assert "tok-123" not in repr(conn)


@pytest.mark.parametrize(("host", "login", "password", "extra", "message"), [
    (None, None, None, {}, "connection 'sr': field 'host' is empty; set it to the registry's URL"),
    ("https://sr", "svc", None, {}, "connection 'sr': basic auth needs both 'login' and 'password'"),
    ("https://sr", "svc", "pw", {"bearer_token": "t"},
     "connection 'sr': set either 'login'/'password' or Extra 'bearer_token'"),
    ("https://sr", None, None, {"timeout_s": "soon"},
     "connection 'sr': Extra 'timeout_s' = 'soon' is not a number of seconds"),
])
def test_a_connection_that_describes_no_registry_is_named_with_its_field(host, login, password, extra, message):
    with pytest.raises(RegistryConnectionError) as err:
        registry_connection("sr", host, None, None, login, password, extra)
    assert str(err.value) == message
    assert "pw" not in str(err.value)


@pytest.mark.parametrize(("host", "path", "problem"), [
    ("http://svc:hunter2-pw@127.0.0.1:8080/apis/ccompat/v7", None, "the URL has a user part (user:password@)"),
    ("svc:hunter2-pw@sr.example", None, "the URL has a user part (user:password@)"),
    ("https://:hunter2-pw@sr.example", None, "the URL has a user part (user:password@)"),
    ("https://sr.example/ccompat?token=hunter2-pw", None, "the URL has a query or a fragment"),
    ("sr.example", "ccompat#hunter2-pw", "the URL has a query or a fragment"),
])
def test_a_registry_url_with_credentials_is_refused_without_echoing_it(host, path, problem):
    """Issue #36 case 5: user info in the URL reached every SchemaRegistryUnavailable message and log line."""
    with pytest.raises(RegistryConnectionError) as err:
        registry_connection("sr", host, 8081, path, None, None, {})
    assert str(err.value) == (f"connection 'sr': field 'host' is refused: {problem}; credentials go in "
                              "'login'/'password' (or Extra 'bearer_token'), never in the URL")
    assert "hunter2" not in str(err.value) and "svc" not in str(err.value)
