"""The SASL mechanisms Samsa serves and speaks: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802/7677).

Server side (one per authentication exchange, made by ``network.sasl_server``): ``evaluate_response``
takes a client token and returns the challenge to send back, until ``complete``; then
``authorization_id`` is who the client is. A failure raises ``SaslFailure``: its ``client_message``
is what the client is told (Kafka's ``SaslAuthenticationException`` messages), or None for Kafka's
generic "invalid credentials" message (Kafka's ``SaslException``, which tells the client nothing about
why); its ``reason`` is for the broker's log. Neither ever holds a password, a proof or a key.

- ``PlainServer``: Kafka's ``PlainSaslServer`` with ``PlainServerCallbackHandler``: the token is
  ``authzid NUL authcid NUL passwd``, checked against the ``user_<name>="<password>"`` options of the
  listener's PlainLoginModule JAAS entry, compared in constant time.
- ``ScramServer``: Kafka's ``ScramSaslServer``: the client-first message (``n,[a=authzid],n=name,r=
  nonce[,ext=value...]``, Kafka's grammar) names the user, whose credential (salt, StoredKey, ServerKey,
  iterations; ``server_common.scram``) comes from the ``ScramCredentialLookup``; the server-first
  message carries the combined nonce, the salt and the iterations (at least the mechanism's 4096); the
  client-final message's proof is checked against StoredKey in constant time, and the server-final
  message carries the server signature. Kafka's ``tokenauth`` extension (delegation tokens) is refused:
  Samsa has no delegation tokens, so no token is valid, as in a Kafka without any. Other extensions
  are ignored, as Kafka ignores them.

Client side (``network.client.NetworkClient``'s SASL step): ``PlainClient`` and ``ScramClient`` as
Kafka's Java client speaks them (no SASLprep of the password, as Kafka's ``ScramFormatter``): the
``initial_response``, then ``evaluate_challenge`` for each server token until ``complete``; the SCRAM
client checks the server's signature.

SCRAM is written here over ``hashlib``/``hmac`` (the primitives of ``server_common.scram``) rather
than with ``scramp``'s state machines: scramp refuses Kafka's extension attributes in the client-first
message and SASLpreps names and passwords, where Kafka does neither. The tests check both sides
against scramp and RFC 7677's test vector.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import re
from collections.abc import Mapping
from typing import Protocol

from server_common.scram import MECHANISMS as SCRAM_MECHANISMS
from server_common.scram import ScramCredential, ScramCredentialLookup, ScramMechanism, secure_random_string

log = logging.getLogger(__name__)

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
# Kafka's ScramLoginModule.TOKEN_AUTH_CONFIG: the extension a delegation token client sends.
TOKEN_AUTH_EXTENSION = "tokenauth"


class SaslFailure(Exception):
    """An authentication exchange failed. ``client_message``: the message the client gets (None: the
    generic one); ``reason``: what the broker logs. Neither holds a secret."""

    def __init__(self, reason: str, client_message: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.client_message = client_message


class SaslServer(Protocol):
    """One server-side authentication exchange (Java's ``SaslServer``)."""

    mechanism: str
    complete: bool
    authorization_id: str | None

    async def evaluate_response(self, token: bytes) -> bytes: ...


# -- PLAIN --------------------------------------------------------------------------------------------


class PlainServer:
    """Kafka's PlainSaslServer: ``users`` maps a username to its password (the JAAS ``user_`` options)."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None

    async def evaluate_response(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("a PLAIN token after the exchange completed", "Authentication already complete")
        text = token.decode("utf-8", errors="replace")
        parts = text.split("\x00", 3)
        if len(parts) != 3:
            message = f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            raise SaslFailure(message, message)
        authzid, username, password = parts
        if not username:
            message = "Authentication failed: username not specified"
            raise SaslFailure(message, message)
        if not password:
            message = "Authentication failed: password not specified"
            raise SaslFailure(message, message)
        expected = self._users.get(username)
        # Compared in constant time, and compared even for an unknown user, so that the time taken
        # does not tell whether the user exists.
        matches = hmac.compare_digest(
            password.encode(), (expected if expected is not None else "\x00").encode()
        )
        if expected is None or not matches:
            why = "unknown user" if expected is None else "wrong password"
            raise SaslFailure(
                f"Authentication failed for user {username!r}: {why}",
                "Authentication failed: Invalid username or password",
            )
        if authzid and authzid != username:
            message = (
                "Authentication failed: Client requested an authorization id that is different from username"
            )
            raise SaslFailure(message, message)
        self.authorization_id = username
        self.complete = True
        return b""


class PlainClient:
    """The client side of PLAIN: one token, ``NUL username NUL password``."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._password = password
        self.complete = False

    def initial_response(self) -> bytes:
        return f"\x00{self._username}\x00{self._password}".encode()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        self.complete = True
        return None


# -- SCRAM --------------------------------------------------------------------------------------------

# Kafka's ScramMessages grammar (ASCII 0x01-0x7F; names escape ',' and '=' as =2C and =3D).
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})"
)
_SERVER_FIRST = re.compile(
    rf"(?:m={_VALUE},)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+){_EXTENSIONS}"
)
_SERVER_FINAL = re.compile(
    rf"(?:e=(?P<error>[\x01-\x2B\x2D-\x3C\x3E-\x7F]+))|(?:v=(?P<signature>{_BASE64})){_EXTENSIONS}"
)


def scram_username(saslname: str) -> str:
    """Kafka's ``ScramFormatter.username``: a SCRAM saslname decoded (=2C is ',', =3D is '=')."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


def scram_saslname(username: str) -> str:
    """Kafka's ``ScramFormatter.saslName``: a username encoded for a SCRAM message."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _extensions(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in text.split(",")[1:] if text else []:
        key, _, value = item.partition("=")
        found[key] = value
    return found


def _client_message(token: bytes, grammar: re.Pattern[str], which: str) -> tuple[str, re.Match[str]]:
    """A SCRAM client message (``which``: first or final) read by its grammar; SaslFailure otherwise."""
    try:
        text = token.decode("ascii")
    except UnicodeDecodeError:
        raise SaslFailure(f"Invalid SCRAM client {which} message format: not ASCII") from None
    m = grammar.fullmatch(text)
    if m is None:
        raise SaslFailure(f"Invalid SCRAM client {which} message format")
    return text, m


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


class ScramServer:
    """Kafka's ScramSaslServer for one of the SCRAM mechanisms; ``server_nonce`` is for tests."""

    def __init__(
        self,
        mechanism: str,
        credentials: ScramCredentialLookup | None,
        *,
        server_nonce: str | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._scram: ScramMechanism = SCRAM_MECHANISMS[mechanism]
        self._credentials = credentials
        self._server_nonce = server_nonce or secure_random_string()
        self.complete = False
        self.authorization_id: str | None = None
        self._stage = 0  # 0: expects client-first, 1: client-final, 2: done or failed
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2_header = ""
        self._username = ""

    async def evaluate_response(self, token: bytes) -> bytes:
        stage, self._stage = self._stage, 2  # a failure below leaves the exchange failed
        if stage == 0:
            response = await self._client_first(token)
            self._stage = 1
            return response
        if stage == 1:
            response = self._client_final(token)
            self.complete = True
            return response
        raise SaslFailure(f"Unexpected challenge in Sasl server state for {self.mechanism}")

    async def _client_first(self, token: bytes) -> bytes:
        text, m = _client_message(token, _CLIENT_FIRST, "first")
        username = scram_username(m["saslname"])
        extensions = _extensions(m["extensions"])
        if extensions.get(TOKEN_AUTH_EXTENSION, "false").lower() == "true":
            # A delegation token's id in place of a user: Samsa has no delegation tokens.
            raise SaslFailure(f"Token Authentication failed: Invalid tokenId : {username}")
        unsupported = set(extensions) - {TOKEN_AUTH_EXTENSION}
        if unsupported:
            log.debug("SCRAM extensions %s are not supported and are ignored", sorted(unsupported))
        if self._credentials is None:
            raise SaslFailure(
                f"Authentication failed: no SCRAM credentials on this server for user {username!r}"
            )
        try:
            credential = await self._credentials(self.mechanism, username)
        except Exception as e:  # the store's failure is the server's, not the client's
            log.warning("could not look up the %s credential of %r: %s", self.mechanism, username, e)
            raise SaslFailure("Authentication failed: Credentials could not be obtained") from None
        if credential is None:
            raise SaslFailure(
                "Authentication failed: Invalid user credentials "
                f"(no {self.mechanism} credential for {username!r})"
            )
        authzid = m["authzid"]
        if authzid and scram_username(authzid) != username:
            message = (
                "Authentication failed: Client requested an authorization id that is different from username"
            )
            raise SaslFailure(message, message)
        if credential.iterations < self._scram.min_iterations:
            raise SaslFailure(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{self._scram.min_iterations} for {self.mechanism}"
            )
        self._credential = credential
        self._username = username
        self._gs2_header = text[: m.start("bare")]
        self._client_first_bare = m["bare"]
        self._nonce = m["nonce"] + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        credential = self._credential
        assert credential is not None
        self._credential = None  # Kafka's clearCredentials: whatever happens next
        _, m = _client_message(token, _CLIENT_FINAL, "final")
        # Kafka checks that the nonce *ends with* the combined nonce, not that it equals it: librdkafka
        # before 2.2 (Debian's kcat) sends its own nonce followed by the combined one, and signs that.
        if not m["nonce"].endswith(self._nonce):
            raise SaslFailure("Invalid client nonce in the final client message.")
        try:
            channel = base64.b64decode(m["channel"], validate=True)
            proof = base64.b64decode(m["proof"], validate=True)
        except (binascii.Error, ValueError):
            raise SaslFailure("Invalid SCRAM client final message format: bad base64") from None
        if channel != self._gs2_header.encode():
            raise SaslFailure(
                "Invalid SCRAM client final message: channel binding does not match the GS2 header"
            )
        scram = self._scram
        auth_message = f"{self._client_first_bare},{self._server_first},{m['without_proof']}".encode()
        client_signature = scram.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise SaslFailure("Invalid client credentials")
        computed_stored_key = scram.hash(_xor(client_signature, proof))
        if not hmac.compare_digest(computed_stored_key, credential.stored_key):
            raise SaslFailure(
                f"Invalid client credentials (a wrong {self.mechanism} proof for {self._username!r})"
            )
        server_signature = scram.hmac(credential.server_key, auth_message)
        self.authorization_id = self._username
        return f"v={_b64(server_signature)}".encode()


class ScramClient:
    """The client side of SCRAM, as Kafka's ScramSaslClient (``client_nonce`` is for tests)."""

    def __init__(
        self, mechanism: str, username: str, password: str, *, client_nonce: str | None = None
    ) -> None:
        self.mechanism = mechanism
        self._scram: ScramMechanism = SCRAM_MECHANISMS[mechanism]
        self._username = username
        self._password = password
        self._client_nonce = client_nonce or secure_random_string()
        self._client_first_bare = f"n={scram_saslname(username)},r={self._client_nonce}"
        self._stage = 0
        self._server_signature = b""
        self.complete = False

    def initial_response(self) -> bytes:
        self._stage = 1
        return f"n,,{self._client_first_bare}".encode()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """The client-final message for the server-first one; None once the server-final message
        has been checked. SaslFailure when the server's messages are wrong."""
        text = challenge.decode("ascii", errors="replace")
        if self._stage == 1:
            m = _SERVER_FIRST.fullmatch(text)
            if m is None:
                raise SaslFailure(f"Invalid SCRAM server first message format: {text!r}")
            nonce, iterations = m["nonce"], int(m["iterations"])
            if not nonce.startswith(self._client_nonce) or len(nonce) <= len(self._client_nonce):
                raise SaslFailure("Invalid server nonce: does not start with the client nonce")
            if iterations < self._scram.min_iterations:
                raise SaslFailure(
                    f"Requested iterations {iterations} is less than the minimum "
                    f"{self._scram.min_iterations} for {self.mechanism}"
                )
            scram = self._scram
            salted = scram.salted_password(self._password, base64.b64decode(m["salt"]), iterations)
            client_key, stored_key, server_key = scram.derive_keys(salted)
            without_proof = f"c={_b64(b'n,,')},r={nonce}"
            auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
            proof = _xor(client_key, scram.hmac(stored_key, auth_message))
            self._server_signature = scram.hmac(server_key, auth_message)
            self._stage = 2
            return f"{without_proof},p={_b64(proof)}".encode()
        if self._stage == 2:
            m = _SERVER_FINAL.fullmatch(text)
            if m is None:
                raise SaslFailure(f"Invalid SCRAM server final message format: {text!r}")
            if m["error"] is not None:
                raise SaslFailure(
                    f"Sasl authentication using {self.mechanism} failed with error: {m['error']}"
                )
            signature = base64.b64decode(m["signature"])
            if not hmac.compare_digest(signature, self._server_signature):
                raise SaslFailure("Invalid server signature in server final message")
            self._stage = 3
            self.complete = True
            return None
        raise SaslFailure(f"Unexpected SCRAM challenge in client state {self._stage}")


class SaslClient(Protocol):
    mechanism: str
    complete: bool

    def initial_response(self) -> bytes: ...

    def evaluate_challenge(self, challenge: bytes) -> bytes | None: ...


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """The client side of ``mechanism`` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)."""
    if mechanism == PLAIN:
        return PlainClient(username, password)
    if mechanism in SCRAM_MECHANISMS:
        return ScramClient(mechanism, username, password)
    raise ValueError(
        f"SASL mechanism {mechanism} is not supported (supported: {', '.join(SUPPORTED_MECHANISMS)})"
    )
