"""A small certificate authority for secured Samsa clusters and their tests, with ``cryptography``.

``create_ca(dir)`` makes a self-signed CA (``ca.pem`` certificate, ``ca-key.pem`` key); ``issue_certificate(
ca, dir, name, hosts, ips, client=...)`` signs a leaf certificate for a server (serverAuth and clientAuth:
a broker is also a client of the others) or a client (clientAuth), written as

- ``<name>.pem``: the certificate followed by the CA's (the chain a peer is shown),
- ``<name>-key.pem``: its private key (PKCS#8; encrypted when ``key_password`` is given), mode 0600,
- ``<name>-keystore.pem``: key and chain in one file, Kafka's ``ssl.keystore.type=PEM`` key store, 0600,
- ``<name>.p12``: a PKCS#12 key store (``ssl.keystore.type=PKCS12``) when ``pkcs12_password`` is given,

and ``truststore.p12``/``ca.pem`` serve as trust stores. Keys are ECDSA P-256 (fast to make, understood
by Java, librdkafka, OpenSSL and Node) unless ``key_type="rsa"``.

Kafka itself ships no such tool (its docs use ``keytool`` and ``openssl``); ``samsa up --secure`` and the
tests use this one. Secrets are generated at run time, never committed.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

CA_CERT = "ca.pem"
CA_KEY = "ca-key.pem"
TRUSTSTORE_P12 = "truststore.p12"
DEFAULT_DAYS = 825


@dataclass(frozen=True)
class CertificateAuthority:
    directory: Path
    cert_path: Path
    key_path: Path
    certificate: x509.Certificate = field(repr=False)
    key: PrivateKey = field(repr=False)

    @property
    def pem(self) -> str:
        return self.certificate.public_bytes(serialization.Encoding.PEM).decode()

    def truststore_p12(self, password: str) -> Path:
        """A PKCS#12 trust store holding the CA certificate (``ssl.truststore.type=PKCS12``)."""
        path = self.directory / TRUSTSTORE_P12
        data = pkcs12.serialize_key_and_certificates(
            b"ca", None, None, [self.certificate], _p12_encryption(password)
        )
        _write(path, data, 0o644)
        return path


@dataclass(frozen=True)
class IssuedCertificate:
    name: str
    cert_path: Path  # the certificate and the CA's, PEM
    key_path: Path  # the private key, PEM (PKCS#8)
    keystore_pem_path: Path  # key + chain in one file (ssl.keystore.type=PEM)
    ca_path: Path
    pkcs12_path: Path | None
    pkcs12_password: str | None = field(repr=False)
    key_password: str | None = field(repr=False)
    certificate: x509.Certificate = field(repr=False)

    @property
    def cert_pem(self) -> str:
        return self.cert_path.read_text()

    @property
    def key_pem(self) -> str:
        return self.key_path.read_text()


def _new_key(key_type: str) -> PrivateKey:
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"key_type must be 'ec' or 'rsa', not {key_type!r}")


def _p12_encryption(password: str) -> serialization.KeySerializationEncryption:
    # AES-256 + SHA-256 PBES2 (what keytool writes since Java 12; readable by Java 11.0.12+, OpenSSL 3).
    return (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(10000)
        .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
        .hmac_hash(hashes.SHA256())
        .build(password.encode())
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(path, mode)


def _key_pem(key: PrivateKey, password: str | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def create_ca(
    directory: str | Path, common_name: str = "Samsa CA", *, days: int = 3650, key_type: str = "ec"
) -> CertificateAuthority:
    """A self-signed CA written to ``directory`` (``ca.pem``, ``ca-key.pem`` mode 0600)."""
    directory = Path(directory)
    key = _new_key(key_type)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    _write(key_path, _key_pem(key, None), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return CertificateAuthority(directory, cert_path, key_path, cert, key)


def load_ca(directory: str | Path) -> CertificateAuthority:
    """The CA ``create_ca`` wrote to ``directory``."""
    directory = Path(directory)
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    key = serialization.load_pem_private_key(key_path.read_bytes(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey)
    return CertificateAuthority(directory, cert_path, key_path, cert, key)


def _subject(name: str, subject: str | x509.Name | None) -> x509.Name:
    if isinstance(subject, x509.Name):
        return subject
    if subject:
        return x509.Name.from_rfc4514_string(subject)
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])


def issue_certificate(
    ca: CertificateAuthority,
    directory: str | Path,
    name: str,
    hosts: Iterable[str] = (),
    ips: Iterable[str] = (),
    *,
    client: bool = False,
    subject: str | x509.Name | None = None,
    pkcs12_password: str | None = None,
    key_password: str | None = None,
    days: int = DEFAULT_DAYS,
    key_type: str = "ec",
) -> IssuedCertificate:
    """A certificate signed by ``ca`` for ``name`` (subject ``CN=<name>`` unless ``subject`` gives an
    RFC 4514 DN), with ``hosts`` and ``ips`` as subject alternative names. A server certificate
    (``client=False``) may serve and connect (serverAuth, clientAuth); a client one only connects."""
    directory = Path(directory)
    key = _new_key(key_type)
    now = _now()
    sans: list[x509.GeneralName] = [x509.DNSName(h) for h in hosts]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    usages = (
        [ExtendedKeyUsageOID.CLIENT_AUTH]
        if client
        else [
            ExtendedKeyUsageOID.SERVER_AUTH,
            ExtendedKeyUsageOID.CLIENT_AUTH,
        ]
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(_subject(name, subject))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=key_type == "rsa",
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca.certificate.public_bytes(
        serialization.Encoding.PEM
    )
    cert_path = directory / f"{name}.pem"
    key_path = directory / f"{name}-key.pem"
    keystore_path = directory / f"{name}-keystore.pem"
    key_pem = _key_pem(key, key_password)
    _write(key_path, key_pem, 0o600)
    _write(cert_path, chain, 0o644)
    _write(keystore_path, key_pem + chain, 0o600)
    p12_path = None
    if pkcs12_password is not None:
        p12_path = directory / f"{name}.p12"
        data = pkcs12.serialize_key_and_certificates(
            name.encode(), key, cert, [ca.certificate], _p12_encryption(pkcs12_password)
        )
        _write(p12_path, data, 0o600)
    return IssuedCertificate(
        name, cert_path, key_path, keystore_path, ca.cert_path, p12_path, pkcs12_password, key_password, cert
    )
