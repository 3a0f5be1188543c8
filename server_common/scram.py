"""SCRAM credentials as Kafka keeps them (RFC 5802/7677, Kafka's ScramCredential and ScramFormatter).

A user's SCRAM credential for one mechanism is what the server needs to check a client's proof without
knowing the password: the salt, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))``,
``ServerKey = HMAC(SaltedPassword, "Server Key")`` and the iteration count, where
``SaltedPassword = Hi(password, salt, iterations)`` (PBKDF2 with the mechanism's HMAC).

Kafka stores it in ZooKeeper as a user entity config named after the mechanism, in the string form of
its ``ScramCredentialUtils``: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` (standard
base64 with padding). :class:`CredentialCache` is the broker's in-memory copy (Kafka's
``CredentialCache``), kept current from ZooKeeper's config change notifications; anything that answers
``await lookup(mechanism, username)`` is a :data:`ScramCredentialLookup` (the SASL server asks one).

The password is encoded as UTF-8 without SASLprep, as Kafka's ``ScramFormatter.normalize`` does, so a
credential made here verifies the same clients Kafka's would.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"

# Kafka's ScramCredentialUpsertion / UserScramCredentialRecord accept at most this many iterations
# (ZkAdminManager's maxIterations); the minimum is the mechanism's (4096 for both).
MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class ScramMechanism:
    """One SCRAM mechanism (Kafka's ``ScramMechanism``: the wire type byte never changes)."""

    name: str
    type: int  # the byte in Describe/AlterUserScramCredentials
    hash_name: str  # hashlib's name
    min_iterations: int = 4096
    max_iterations: int = MAX_ITERATIONS

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """``Hi(Normalize(password), salt, i)`` of RFC 5802: PBKDF2 with this mechanism's HMAC."""
        return hashlib.pbkdf2_hmac(self.hash_name, normalize(password), salt, iterations)

    def derive_keys(self, salted_password: bytes) -> tuple[bytes, bytes, bytes]:
        """RFC 5802's ``(ClientKey, StoredKey, ServerKey)`` of a salted password: ``ClientKey =
        HMAC(SaltedPassword, "Client Key")``, ``StoredKey = H(ClientKey)``, ``ServerKey =
        HMAC(SaltedPassword, "Server Key")`` (the client proves ClientKey; the server keeps the other two)."""
        client_key = self.hmac(salted_password, b"Client Key")
        return client_key, self.hash(client_key), self.hmac(salted_password, b"Server Key")


MECHANISMS: dict[str, ScramMechanism] = {
    SCRAM_SHA_256: ScramMechanism(SCRAM_SHA_256, 1, "sha256"),
    SCRAM_SHA_512: ScramMechanism(SCRAM_SHA_512, 2, "sha512"),
}
UNKNOWN_MECHANISM_TYPE = 0  # Kafka's public ScramMechanism.UNKNOWN
MECHANISMS_BY_TYPE: dict[int, ScramMechanism] = {m.type: m for m in MECHANISMS.values()}


def mechanism(name: str) -> ScramMechanism:
    """The SCRAM mechanism called ``name`` (exact, as Kafka: ``SCRAM-SHA-256``); KeyError otherwise."""
    return MECHANISMS[name]


def is_scram(name: str) -> bool:
    return name in MECHANISMS


def normalize(password: str) -> bytes:
    """Kafka's ``ScramFormatter.normalize``: the UTF-8 bytes (no SASLprep)."""
    return password.encode("utf-8")


def secure_random_string() -> str:
    """Kafka's ``ScramFormatter.secureRandomString``: a random 130-bit number written in base 36 (about
    26 characters). SCRAM's nonces are such strings, and its salts their bytes."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def secure_random_salt() -> bytes:
    """A salt as Kafka's ``ScramFormatter.secureRandomBytes`` makes one: the UTF-8 bytes of a
    :func:`secure_random_string`."""
    return secure_random_string().encode()


_FIELDS = ("salt", "stored_key", "server_key", "iterations")


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps of a user's password for one mechanism (Kafka's ``ScramCredential``).

    The keys are left out of ``repr`` so that a credential never reaches a log line."""

    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism_name: str, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """Kafka's ``ScramFormatter.generateCredential(salt, saltedPassword, iterations)``: what
        AlterUserScramCredentials stores from the salt and salted password a client sends."""
        _, stored_key, server_key = mechanism(mechanism_name).derive_keys(salted_password)
        return cls(salt, stored_key, server_key, iterations)

    @classmethod
    def from_password(
        cls, mechanism_name: str, password: str, iterations: int = 4096, salt: bytes | None = None
    ) -> ScramCredential:
        """A new credential for ``password`` (a fresh salt unless one is given), as Kafka's
        ``ScramFormatter.generateCredential(password, iterations)``."""
        m = mechanism(mechanism_name)
        salt = secure_random_salt() if salt is None else salt
        return cls.from_salted_password(
            mechanism_name, salt, m.salted_password(password, salt, iterations), iterations
        )

    def to_string(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString``."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        """Kafka's ``ScramCredentialUtils.credentialFromString``: exactly the four fields, in any order;
        ValueError otherwise (the message does not repeat the value: it holds the keys)."""
        props: dict[str, str] = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ValueError(
                    "Credentials not valid: not of the form "
                    "salt=...,stored_key=...,server_key=...,iterations=..."
                )
            props[key] = value
        if len(props) != 4 or any(k not in props for k in _FIELDS):
            raise ValueError(
                f"Credentials not valid: expected the fields {', '.join(_FIELDS)}, "
                f"found {', '.join(sorted(props))}"
            )
        try:
            return cls(
                base64.b64decode(props["salt"], validate=True),
                base64.b64decode(props["stored_key"], validate=True),
                base64.b64decode(props["server_key"], validate=True),
                int(props["iterations"]),
            )
        except (binascii.Error, ValueError) as e:
            raise ValueError(f"Credentials not valid: {type(e).__name__}") from None

    def verify_password(self, mechanism_name: str, password: str) -> bool:
        """Whether ``password`` is the one this credential was made from (constant-time compare)."""
        other = ScramCredential.from_password(mechanism_name, password, self.iterations, self.salt)
        return hmac.compare_digest(other.stored_key, self.stored_key) and hmac.compare_digest(
            other.server_key, self.server_key
        )


# Anything the SASL server can ask for a user's credential: ``await lookup("SCRAM-SHA-512", "alice")``.
ScramCredentialLookup = Callable[[str, str], Awaitable[ScramCredential | None]]


def credentials_from_config(config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials in a user's entity config (``/config/users/<user>``), by mechanism; an
    entry that does not parse is left out (ValueError from :meth:`ScramCredential.from_string` is for
    callers that want to report it)."""
    found: dict[str, ScramCredential] = {}
    for name in MECHANISMS:
        value = config.get(name)
        if value is None:
            continue
        try:
            found[name] = ScramCredential.from_string(value)
        except ValueError:
            continue
    return found


class CredentialCache:
    """The broker's SCRAM credentials in memory (Kafka's ``CredentialCache`` as its
    ``CredentialProvider`` fills it): mechanism -> username -> credential.

    ``update_user`` takes a user's whole entity config, as Kafka's ``updateCredentials`` does on a
    config change: a mechanism present is (re)set, one absent is removed. The instance itself is a
    :data:`ScramCredentialLookup`."""

    def __init__(self, mechanisms: Iterable[str] = MECHANISMS) -> None:
        self._caches: dict[str, dict[str, ScramCredential]] = {m: {} for m in mechanisms if m in MECHANISMS}

    def update_user(self, username: str, config: Mapping[str, str]) -> None:
        credentials = credentials_from_config(config)
        for name, cache in self._caches.items():
            credential = credentials.get(name)
            if credential is None:
                cache.pop(username, None)
            else:
                cache[username] = credential

    def remove_user(self, username: str) -> None:
        for cache in self._caches.values():
            cache.pop(username, None)

    def load(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Replaces everything with the users' configs (username -> entity config)."""
        for cache in self._caches.values():
            cache.clear()
        for username, config in configs.items():
            self.update_user(username, config)

    def get(self, mechanism_name: str, username: str) -> ScramCredential | None:
        cache = self._caches.get(mechanism_name)
        return None if cache is None else cache.get(username)

    def users(self, mechanism_name: str) -> list[str]:
        return sorted(self._caches.get(mechanism_name, {}))

    async def lookup(self, mechanism_name: str, username: str) -> ScramCredential | None:
        return self.get(mechanism_name, username)

    async def __call__(self, mechanism_name: str, username: str) -> ScramCredential | None:
        return self.get(mechanism_name, username)
