"""Certificates and keys: the webhook's self-managed CA and serving certificate (also used
for the test API server and the test cluster's components)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from trainop import wallclock


@dataclass(frozen=True)
class CertPair:
    cert_pem: bytes
    key_pem: bytes


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def rsa_key_pem() -> bytes:
    """A fresh 2048-bit RSA private key in PEM (service-account signing key)."""
    return _key_pem(_key())


def not_after(cert_pem: bytes) -> dt.datetime:
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc


def ca_and_serving_cert(
    common_name: str, dns_names: list[str], ips: list[str], days: int = 7
) -> tuple[CertPair, CertPair]:
    """A CA, and a serving certificate it signed for the given names and addresses."""
    ca = new_ca(f"{common_name}-ca", days)
    return ca, issue(ca, common_name, dns_names=dns_names, ips=ips, days=days)


def new_ca(common_name: str, days: int = 7, dns_names: tuple[str, ...] = ()) -> CertPair:
    """A self-signed certificate authority (valid for `dns_names` too, where a peer checks
    its CA's name as a host name)."""
    now = wallclock.now()
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    )
    if dns_names:
        cert = cert.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False)
    signed = cert.sign(key, hashes.SHA256())
    return CertPair(signed.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue(
    ca: CertPair, common_name: str, *, organizations: list[str] | None = None,
    dns_names: list[str] | None = None, ips: list[str] | None = None, days: int = 7,
) -> CertPair:
    """A certificate signed by `ca`: a serving one where names or addresses are given, a
    client one (user `common_name` in groups `organizations`) either way."""
    now = wallclock.now()
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, rsa.RSAPrivateKey)
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations or []]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    key = _key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
    )
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names or []]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips or []]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return CertPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))
