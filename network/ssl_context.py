"""SSLContexts from Kafka's TLS settings, for a server's listener and for a client.

``SslSettings`` holds Kafka's ``ssl.*`` settings as one listener (``SslSettings.for_listener``: a
setting's ``listener.name.<l>.`` override over the plain one) or one client sees them;
``server_context`` / ``client_context`` build the SSLContext (Kafka's DefaultSslEngineFactory):

- the key store: ``ssl.keystore.type`` PEM (``ssl.keystore.location``: a file with the private key and
  the certificate chain, or inline ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``; an
  encrypted key takes ``ssl.key.password``) or PKCS12 (``ssl.keystore.location`` +
  ``ssl.keystore.password``, read with ``cryptography``). JKS, Kafka's default type, is Java's own format:
  a file that is one is refused naming ``ssl.keystore.type``; a PKCS#12 file given as JKS is read, as
  Java's dual-format JKS key store reads it.
- the trust store: PEM (``ssl.truststore.location`` or inline ``ssl.truststore.certificates``), PKCS12
  (its certificates), else the system's CAs (Java's ``cacerts``).
- ``ssl.client.auth`` none/requested/required (on SASL_SSL listeners only when given per listener, as
  Kafka), ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3, ...: the lowest and highest enabled bound the
  versions), ``ssl.cipher.suites`` (Java/IANA names or OpenSSL names; Python cannot narrow TLS 1.3's
  suites, so they stay all enabled), and for clients ``ssl.endpoint.identification.algorithm`` (https:
  the server's certificate must name the host connected to; empty: not checked).

A bad setting is a ``ConfigError`` naming it; the key material is never logged.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from server_common.config import ConfigError

_PEM_KEY = re.compile(rb"-----BEGIN ([A-Z ]*PRIVATE KEY)-----.*?-----END \1-----", re.S)
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_JCEKS_MAGIC = b"\xce\xce\xce\xce"
_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_SSL_PROTOCOL_NAMES = ("TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3", "SSL", "SSLv3", "DTLS")
# IANA (Java) names of the TLS 1.2 suites OpenSSL has, to OpenSSL's names.
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
}
_TLS13_SUITES = {
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_AES_128_CCM_SHA256",
    "TLS_AES_128_CCM_8_SHA256",
}
SSL_SETTINGS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.endpoint.identification.algorithm",
)


def _secret(value: Any) -> str | None:
    if value is None:
        return None
    return str(value)


@dataclass(frozen=True)
class SslSettings:
    """Kafka's TLS settings as one listener or one client sees them (names without ``ssl.``)."""

    keystore_type: str = "JKS"
    keystore_location: str | None = None
    keystore_password: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    keystore_key: str | None = field(default=None, repr=False)
    keystore_certificate_chain: str | None = None
    truststore_type: str = "JKS"
    truststore_location: str | None = None
    truststore_password: str | None = field(default=None, repr=False)
    truststore_certificates: str | None = None
    protocol: str = "TLSv1.3"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    client_auth: str = "none"
    endpoint_identification_algorithm: str = "https"
    # how a setting is named in messages: "ssl.keystore.location" or "listener.name.ssl.ssl.keystore..."
    names: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def name_of(self, setting: str) -> str:
        return self.names.get(setting, setting)

    @classmethod
    def from_getter(cls, get: Callable[[str], Any], names: Mapping[str, str] | None = None) -> SslSettings:
        """From ``get(<Kafka setting name>)`` (None when unset)."""

        def text(name: str, default: str) -> str:
            value = get(name)
            return default if value is None else str(value)

        def items(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
            value = get(name)
            if value is None:
                return default
            if isinstance(value, str):
                return tuple(v.strip() for v in value.split(",") if v.strip())
            return tuple(str(v) for v in value)

        return cls(
            keystore_type=text("ssl.keystore.type", "JKS").upper(),
            keystore_location=get("ssl.keystore.location") or None,
            keystore_password=_secret(get("ssl.keystore.password")),
            key_password=_secret(get("ssl.key.password")),
            keystore_key=_secret(get("ssl.keystore.key")),
            keystore_certificate_chain=_secret(get("ssl.keystore.certificate.chain")),
            truststore_type=text("ssl.truststore.type", "JKS").upper(),
            truststore_location=get("ssl.truststore.location") or None,
            truststore_password=_secret(get("ssl.truststore.password")),
            truststore_certificates=_secret(get("ssl.truststore.certificates")),
            protocol=text("ssl.protocol", "TLSv1.3"),
            enabled_protocols=items("ssl.enabled.protocols", ("TLSv1.2", "TLSv1.3")),
            cipher_suites=items("ssl.cipher.suites", ()),
            client_auth=text("ssl.client.auth", "none").lower(),
            endpoint_identification_algorithm=text("ssl.endpoint.identification.algorithm", "https"),
            names=dict(names or {}),
        )

    @classmethod
    def for_listener(cls, config: Any, listener: str, security_protocol: str | None = None) -> SslSettings:
        """The settings of a server's listener (``config``: a ServerConfig). On a SASL_SSL listener
        ``ssl.client.auth`` applies only when given for that listener, as in Kafka."""
        prefix = f"listener.name.{listener.lower()}."
        originals = config.originals

        def get(name: str) -> Any:
            if name == "ssl.client.auth" and security_protocol == "SASL_SSL":
                if prefix + name not in originals:
                    return "none"
            return config.for_listener(listener, name)

        names = {n: (prefix + n if prefix + n in originals else n) for n in SSL_SETTINGS}
        return cls.from_getter(get, names)

    @property
    def has_key_store(self) -> bool:
        return bool(self.keystore_location or self.keystore_key)


class _SecretWords:
    """Passwords are given as ``str``; ``cryptography`` and ``ssl`` want bytes."""

    @staticmethod
    def encode(password: str | None) -> bytes | None:
        return password.encode() if password else None


def read_setting_file(path: str, setting: str) -> bytes:
    """The bytes of the file a setting names; ConfigError naming the setting when it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"{setting}={path!r} cannot be read: {e.strerror or e}") from None


def _refuse_java_store(data: bytes, type_setting: str, location_setting: str) -> None:
    if data[:4] in (_JKS_MAGIC, _JCEKS_MAGIC):
        raise ConfigError(
            f"{location_setting} is a Java key store (JKS), which Samsa cannot read: convert it to PKCS12 "
            f"(keytool -importkeystore -deststoretype PKCS12) and set {type_setting}=PKCS12, or use PEM"
        )


def _pkcs12(settings: SslSettings, data: bytes, password: str | None, location_setting: str) -> Any:
    try:
        return pkcs12.load_pkcs12(data, _SecretWords.encode(password))
    except ValueError as e:
        raise ConfigError(
            f"{location_setting}={settings.keystore_location or settings.truststore_location!r} is not a "
            f"PKCS12 store readable with the password given: {e}"
        ) from None


def _load_key_store(ctx: ssl.SSLContext, s: SslSettings) -> None:
    """Loads the key and certificate chain into ``ctx`` (through a private temporary file: ``ssl``
    reads them only from files; the key in it is encrypted with a one-time password)."""
    key: Any
    chain: list[x509.Certificate]
    kind = s.keystore_type
    if s.keystore_key or s.keystore_certificate_chain:
        if kind != "PEM":
            raise ConfigError(
                f"{s.name_of('ssl.keystore.key')} is given, which needs "
                f"{s.name_of('ssl.keystore.type')}=PEM, not {kind}"
            )
        if not (s.keystore_key and s.keystore_certificate_chain):
            raise ConfigError(
                f"{s.name_of('ssl.keystore.key')} and {s.name_of('ssl.keystore.certificate.chain')} "
                "must be given together"
            )
        key = _pem_key(s.keystore_key.encode(), s.key_password, s.name_of("ssl.keystore.key"), s)
        chain = _pem_certs(s.keystore_certificate_chain.encode(), s.name_of("ssl.keystore.certificate.chain"))
    else:
        assert s.keystore_location is not None
        location = s.name_of("ssl.keystore.location")
        data = read_setting_file(s.keystore_location, location)
        if kind == "PEM":
            key = _pem_key(data, s.key_password, location, s)
            chain = _pem_certs(data, location)
        else:
            _refuse_java_store(data, s.name_of("ssl.keystore.type"), location)
            store = _pkcs12(s, data, s.keystore_password or s.key_password, location)
            if store.key is None or store.cert is None:
                raise ConfigError(f"{location}={s.keystore_location!r} holds no private key and certificate")
            key = store.key
            chain = [store.cert.certificate, *(c.certificate for c in store.additional_certs)]
    if not chain:
        raise ConfigError(f"{s.name_of('ssl.keystore.location')}: no certificate found in the key store")
    one_time = os.urandom(24).hex()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time.encode()),
    ) + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    with tempfile.TemporaryDirectory(prefix="samsa-ks-") as tmp:
        path = os.path.join(tmp, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        try:
            ctx.load_cert_chain(path, password=one_time)
        except ssl.SSLError as e:
            raise ConfigError(
                f"{s.name_of('ssl.keystore.location')}: the key does not match the certificate: {e}"
            ) from None


def _pem_key(data: bytes, password: str | None, setting: str, s: SslSettings) -> Any:
    found = _PEM_KEY.search(data)
    if found is None:
        raise ConfigError(f"{setting}: no private key found")
    pem = found.group(0) + b"\n"
    try:
        return serialization.load_pem_private_key(pem, _SecretWords.encode(password))
    except TypeError:
        if password:
            raise ConfigError(
                f"{s.name_of('ssl.key.password')} is given but the key in {setting} is not encrypted"
            ) from None
        raise ConfigError(
            f"{setting}: the key is encrypted and {s.name_of('ssl.key.password')} is not set"
        ) from None
    except ValueError:
        raise ConfigError(
            f"{setting}: the private key cannot be read (wrong {s.name_of('ssl.key.password')}?)"
        ) from None


def _pem_certs(data: bytes, setting: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError as e:
        raise ConfigError(f"{setting}: no certificate can be read: {e}") from None


def _load_trust_store(ctx: ssl.SSLContext, s: SslSettings, purpose: ssl.Purpose) -> None:
    if s.truststore_certificates:
        if s.truststore_type != "PEM":
            raise ConfigError(
                f"{s.name_of('ssl.truststore.certificates')} is given, which needs "
                f"{s.name_of('ssl.truststore.type')}=PEM, not {s.truststore_type}"
            )
        certs = _pem_certs(s.truststore_certificates.encode(), s.name_of("ssl.truststore.certificates"))
    elif s.truststore_location:
        location = s.name_of("ssl.truststore.location")
        data = read_setting_file(s.truststore_location, location)
        if s.truststore_type == "PEM" or data.lstrip().startswith(b"-----BEGIN"):
            certs = _pem_certs(data, location)
        else:
            _refuse_java_store(data, s.name_of("ssl.truststore.type"), location)
            store = _pkcs12(s, data, s.truststore_password, location)
            certs = [c.certificate for c in store.additional_certs]
            if store.cert is not None:
                certs.append(store.cert.certificate)
        if not certs:
            raise ConfigError(f"{location}={s.truststore_location!r} holds no certificate")
    else:
        ctx.load_default_certs(purpose)
        return
    ctx.load_verify_locations(
        cadata="".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
    )


def _versions(ctx: ssl.SSLContext, s: SslSettings) -> None:
    if s.protocol not in _SSL_PROTOCOL_NAMES:
        raise ConfigError(f"{s.name_of('ssl.protocol')}={s.protocol!r} is not a TLS protocol name")
    unknown = [p for p in s.enabled_protocols if p not in _PROTOCOLS]
    if unknown or not s.enabled_protocols:
        raise ConfigError(
            f"{s.name_of('ssl.enabled.protocols')}={','.join(s.enabled_protocols)!r} is invalid: "
            f"expected some of {', '.join(_PROTOCOLS)}"
        )
    versions = sorted(_PROTOCOLS[p] for p in s.enabled_protocols)
    try:
        ctx.minimum_version = versions[0]
        ctx.maximum_version = versions[-1]
    except ValueError as e:
        raise ConfigError(f"{s.name_of('ssl.enabled.protocols')}: {e}") from None


def _ciphers(ctx: ssl.SSLContext, s: SslSettings) -> None:
    if not s.cipher_suites:
        return
    names = [_IANA_TO_OPENSSL.get(c, c) for c in s.cipher_suites if c not in _TLS13_SUITES]
    if not names:
        # Only TLS 1.3 suites: no TLS 1.2 suite is allowed, so TLS 1.3 only (Python cannot narrow
        # TLS 1.3's own suites: all of them stay enabled).
        if ctx.maximum_version < ssl.TLSVersion.TLSv1_3:
            raise ConfigError(
                f"{s.name_of('ssl.cipher.suites')} names only TLS 1.3 suites and "
                f"{s.name_of('ssl.enabled.protocols')} has no TLSv1.3"
            )
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        return
    try:
        ctx.set_ciphers(":".join(names))
    except ssl.SSLError:
        raise ConfigError(
            f"{s.name_of('ssl.cipher.suites')}={','.join(s.cipher_suites)!r}: no cipher suite named is "
            "available"
        ) from None


_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(s: SslSettings) -> ssl.SSLContext:
    """The SSLContext of a TLS listener. ConfigError, naming the setting, when it cannot be built."""
    if not s.has_key_store:
        raise ConfigError(
            f"{s.name_of('ssl.keystore.location')} is required for a TLS listener (or "
            f"{s.name_of('ssl.keystore.key')} and {s.name_of('ssl.keystore.certificate.chain')} "
            "with ssl.keystore.type=PEM)"
        )
    if s.client_auth not in _CLIENT_AUTH:
        raise ConfigError(
            f"{s.name_of('ssl.client.auth')}={s.client_auth!r}: expected required, requested or none"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(ctx, s)
    _ciphers(ctx, s)
    _load_key_store(ctx, s)
    ctx.verify_mode = _CLIENT_AUTH[s.client_auth]
    if s.client_auth != "none":
        _load_trust_store(ctx, s, ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(s: SslSettings, *, verify: bool = True) -> ssl.SSLContext:
    """The SSLContext of a client: the trust store, a key store for mutual TLS when given, and host
    name verification when ``ssl.endpoint.identification.algorithm`` is https. ``verify=False``
    (librdkafka's ``enable.ssl.certificate.verification=false``): the server is not verified, and
    no trust store is read."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if verify:
        algorithm = s.endpoint_identification_algorithm.strip().lower()
        if algorithm not in ("https", ""):
            setting = s.name_of("ssl.endpoint.identification.algorithm")
            raise ConfigError(f"{setting}={s.endpoint_identification_algorithm!r}: expected https or empty")
        ctx.check_hostname = algorithm == "https"
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    _versions(ctx, s)
    _ciphers(ctx, s)
    if verify:
        _load_trust_store(ctx, s, ssl.Purpose.SERVER_AUTH)
    if s.has_key_store:
        _load_key_store(ctx, s)
    return ctx
