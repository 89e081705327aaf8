"""A librdkafka client config (a Kafka connection's extra) as the Java client's properties, for the one call made with
Kafka's Java Admin (``kafka.streams_groups``: KIP-1071 streams groups, which librdkafka cannot describe).

Why a translation and not a second config: the Java call must reach the cluster exactly as every other call does, with
the same listener, mechanism, credentials and trust, so it is derived from the one connection. Only what changes how
the client connects or authenticates is carried; a security setting this table does not know (OAUTHBEARER, Kerberos,
a disabled certificate check, ...) is refused naming it, never dropped: a dropped one would connect differently (or
not securely). Settings that only tune librdkafka (timeouts, buffers, its debug contexts) are left out.

The result holds the credentials: it goes to a 0600 file the JVM reads, never to a command line or a log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafka_ferry.core.common.failures import Permanent

# librdkafka SASL mechanism -> the Java login module that speaks it with a username and password
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
SECURITY_PROTOCOLS = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
# Keys read below; any other sasl./ssl. key (or one of these with a value not handled) is refused.
HANDLED = {"bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
           "sasl.password", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
           "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification"}
SECURITY_PREFIXES = ("sasl.", "ssl.", "enable.ssl.", "oauthbearer.", "ssl_")


class UntranslatableConfig(Permanent, ValueError):
    """A connection setting the Java client cannot be given the same way: the Java call is not made (the same
    connection gives the same answer on every try)."""


def java_properties(config: Mapping[str, Any], read_text: Callable[[str], str]) -> dict[str, str]:
    """The Java Admin properties for librdkafka ``config``; ``read_text`` reads a PEM file the config names (its
    client certificate and key go inline: the Java client takes a PEM key store only as text). Raises
    ``UntranslatableConfig`` naming the setting (never its value) it cannot carry."""
    for key in sorted(config):
        if key.startswith(SECURITY_PREFIXES) and key not in HANDLED:
            raise UntranslatableConfig(f"connection setting {key!r} has no translation for Kafka's Java client")
    servers = config.get("bootstrap.servers")
    if not servers:
        raise UntranslatableConfig("connection setting 'bootstrap.servers' is missing")
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise UntranslatableConfig(f"connection setting 'security.protocol' {protocol!r} is not one of "
                                   f"{', '.join(sorted(SECURITY_PROTOCOLS))}")
    out = {"bootstrap.servers": str(servers), "security.protocol": protocol}
    if protocol.startswith("SASL_"):
        mechanism = str(config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "GSSAPI").upper()
        if mechanism not in LOGIN_MODULES:
            raise UntranslatableConfig(f"connection setting 'sasl.mechanism' {mechanism!r} has no translation for "
                                       f"Kafka's Java client (only {', '.join(sorted(LOGIN_MODULES))})")
        username, password = config.get("sasl.username"), config.get("sasl.password")
        if username is None or password is None:
            raise UntranslatableConfig(f"SASL {mechanism} needs 'sasl.username' and 'sasl.password'")
        out["sasl.mechanism"] = mechanism
        out["sasl.jaas.config"] = (f'{LOGIN_MODULES[mechanism]} required username="{_jaas(str(username))}" '
                                   f'password="{_jaas(str(password))}";')
    if protocol.endswith("SSL"):
        out.update(_tls(config, read_text))
    return out


def _tls(config: Mapping[str, Any], read_text: Callable[[str], str]) -> dict[str, str]:
    if str(config.get("enable.ssl.certificate.verification", "true")).lower() not in ("true", "1"):
        raise UntranslatableConfig("connection setting 'enable.ssl.certificate.verification' false has no "
                                   "translation for Kafka's Java client (it always verifies the broker)")
    out: dict[str, str] = {}
    algorithm = str(config.get("ssl.endpoint.identification.algorithm", "https")).lower()
    if algorithm not in ("https", "none"):
        raise UntranslatableConfig(f"connection setting 'ssl.endpoint.identification.algorithm' {algorithm!r} is "
                                   "not https or none")
    out["ssl.endpoint.identification.algorithm"] = "https" if algorithm == "https" else ""
    if config.get("ssl.ca.location"):
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = str(config["ssl.ca.location"])
    cert, key = config.get("ssl.certificate.location"), config.get("ssl.key.location")
    if bool(cert) != bool(key):
        raise UntranslatableConfig("connection settings 'ssl.certificate.location' and 'ssl.key.location' go "
                                   "together (a client certificate needs its key)")
    if cert and key:
        out["ssl.keystore.type"] = "PEM"
        out["ssl.keystore.certificate.chain"] = read_text(str(cert))
        out["ssl.keystore.key"] = read_text(str(key))
        if config.get("ssl.key.password"):
            out["ssl.key.password"] = str(config["ssl.key.password"])
    return out


def _jaas(value: str) -> str:
    """A value inside a JAAS quoted string: Kafka parses it with Java's StreamTokenizer, where \\ escapes."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def properties_text(props: Mapping[str, str]) -> str:
    """``props`` in java.util.Properties' file syntax, read as UTF-8 (StreamsGroups.java loads it through a UTF-8
    reader); every character special to that syntax escaped, so a value can neither end its line nor start a key."""
    return "".join(f"{_escape(k, key=True)}={_escape(v)}\n" for k, v in sorted(props.items()))


def _escape(text: str, key: bool = False) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\f":
            out.append("\\f")
        elif ch in "=:#!" or (ch == " " and (key or i == 0)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)
