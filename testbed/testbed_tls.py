"""TLS material of the secure test bed: one CA and a broker certificate per cluster, PEM files, made once.

Uses the `cryptography` package (in the project's venv and in the CI's system Python); imported by
kafka_testbed.py only when a cluster starts. Broker certificates name 127.0.0.1 and localhost, so clients
keep hostname verification on. Private keys are written mode 0600.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALID_DAYS = 365


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _builder(subject: str, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS)))


def ensure_ca(tls_dir: Path) -> Path:
    """The CA (ca.pem public, ca.key 0600); returns the path of ca.pem, the clients' trust anchor."""
    tls_dir.mkdir(parents=True, exist_ok=True)
    ca_pem = tls_dir / "ca.pem"
    if ca_pem.exists() and (tls_dir / "ca.key").exists():
        return ca_pem
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafka-ferry test bed CA")])
    cert = (_builder("kafka-ferry test bed CA", name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    _write_private(tls_dir / "ca.key", _key_pem(key))
    ca_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return ca_pem


def ensure_broker_keystore(tls_dir: Path, name: str) -> Path:
    """`<name>-broker.pem`: the broker's PKCS#8 key then its certificate and the CA (a PEM keystore)."""
    path = tls_dir / f"{name}-broker.pem"
    if path.exists():
        return path
    ensure_ca(tls_dir)
    ca_key = serialization.load_pem_private_key((tls_dir / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey), "ca.key is not the EC key ensure_ca writes"
    ca_cert = x509.load_pem_x509_certificate((tls_dir / "ca.pem").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    sans = x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert = (_builder(f"kafka-ferry {name} broker", ca_cert.subject, key.public_key())
            .add_extension(sans, critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write_private(path, _key_pem(key) + cert.public_bytes(serialization.Encoding.PEM)
                   + ca_cert.public_bytes(serialization.Encoding.PEM))
    return path
