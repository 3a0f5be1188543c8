"""SASL on the server: each connection of a SASL listener authenticates before it is served.

Kafka's ``SaslServerAuthenticator`` (clients/.../security/authenticator), with its SocketServer's part of
KIP-368 (re-authentication), fitted to Samsa's processor and handler pool:

- ``authenticator_factory(config, listener, credentials)`` reads a SASL listener's settings once, at
  start (a bad one is a ``ConfigError`` naming it): ``sasl.enabled.mechanisms`` (PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512), the PLAIN users of ``listener.name.<l>.plain.sasl.jaas.config`` (the
  ``user_<name>="<password>"`` options of its PlainLoginModule entry), ``connections.max.reauth.ms``
  (per listener and mechanism), ``sasl.server.max.receive.size`` and
  ``connection.failed.authentication.delay.ms``; SCRAM credentials come from the server's
  ``ScramCredentialLookup`` (``server_common.scram``). It returns the factory of each connection's
  ``SaslServerAuthenticator`` (``network.listener_security`` calls it once the connection is made).
- The gate: the processor hands every frame of a SASL connection to ``admit`` before decoding it.
  Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate pass; any other request
  fails the authentication ("Unexpected Kafka request of type ... during SASL handshake"), and the
  connection is closed after the failure delay, logged with the peer. Frames larger than
  ``sasl.server.max.receive.size`` (512 KiB) close the connection before authentication. After a
  SaslHandshake v0, frames are raw SASL tokens without a Kafka header (Kafka's legacy framing), answered
  with raw tokens. Once authenticated, frames pass untouched, but when the session has expired
  (``connections.max.reauth.ms``) anything but a SaslHandshake that starts re-authentication closes
  the connection (Kafka's SocketServer: "Disconnecting expired channel").
- The handlers (``sasl_handlers()``: SaslHandshake 17, SaslAuthenticate 36, for the broker's KafkaApis
  and the controller's ControllerApis) run the exchange on the request's connection's authenticator, in
  order with the connection's other requests. On a listener without SASL they answer
  ILLEGAL_SASL_STATE as Kafka's KafkaApis does.
- Errors, as Kafka: UNSUPPORTED_SASL_MECHANISM (33) with the enabled mechanisms; ILLEGAL_SASL_STATE
  (34) for an exchange out of order; SASL_AUTHENTICATION_FAILED (58) with the mechanism's message or
  Kafka's "Authentication failed during authentication due to invalid credentials with SASL mechanism
  <m>". A failed authentication is answered, and the connection closed, after
  ``connection.failed.authentication.delay.ms`` (100 ms), frames meanwhile ignored (Kafka mutes the
  channel); the failure is logged at INFO with the peer, never with a password or proof.
- Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 the SaslAuthenticate response
  carries ``session_lifetime_ms`` (v1+); a SaslHandshake on the authenticated connection (at most one a
  second) starts a new exchange with the same mechanism, which must end with the same principal.

Departures from Kafka: a repeated ApiVersions before the handshake is answered (Kafka closes the
connection), and a request other than SaslAuthenticate in the middle of the exchange closes the
connection without a response of its own type (Kafka sends that API's error response first).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from network.handler_pool import Parked
from network.jaas import JAAS_USER_PREFIX, LOGIN_MODULES, PLAIN_LOGIN_MODULE, JaasError, parse_single_entry
from network.request_channel import Request
from network.sasl_mechanisms import (
    PLAIN,
    SUPPORTED_MECHANISMS,
    PlainServer,
    SaslFailure,
    SaslServer,
    ScramServer,
)
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.frame import peek_request
from protocol.framing import SIZE
from protocol.messages import (
    Message,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)
from protocol.primitives import DecodeError
from server_common.config import ConfigError
from server_common.principal import USER_TYPE, KafkaPrincipal
from server_common.scram import ScramCredentialLookup

if TYPE_CHECKING:
    from network.processor import Connection

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]

# KIP-368: a client may start re-authenticating at most once a second (Kafka's KafkaChannel).
MIN_REAUTH_INTERVAL_SECONDS = 1.0
# ``Request.requested_version`` of a raw SASL token (after SaslHandshake v0): no Kafka header.
RAW_TOKEN = -1
_PRE_AUTH_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_SASL_AUTHENTICATE_API = api(ApiKey.SASL_AUTHENTICATE)
assert _SASL_AUTHENTICATE_API is not None
_AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


class SaslState(Enum):
    HANDSHAKE = "handshake"  # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "authenticate"  # SaslAuthenticate (or raw tokens) expected
    COMPLETE = "complete"
    FAILED = "failed"  # answered and closed after the failure delay


@dataclass(frozen=True)
class SaslListenerSettings:
    """What a SASL listener's authenticators need, read once from the server's config."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    credentials: ScramCredentialLookup | None = None
    reauth_ms: Mapping[str, int] = field(default_factory=dict)  # by mechanism; 0: sessions never expire
    max_receive_size: int = 524288
    failed_delay_ms: int = 100


def listener_settings(
    config: Any, listener: str, credentials: ScramCredentialLookup | None
) -> SaslListenerSettings:
    """The SASL settings of ``listener`` (``config``: a broker's or controller's ServerConfig);
    ConfigError naming the setting when one is missing or wrong."""
    prefix = f"listener.name.{listener.lower()}"
    mechanisms = tuple(str(m).strip() for m in config.for_listener(listener, "sasl.enabled.mechanisms") or ())
    mechanisms = tuple(m for m in mechanisms if m)
    if not mechanisms:
        raise ConfigError(f"sasl.enabled.mechanisms: the SASL listener {listener} has no mechanism enabled")
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise ConfigError(
            f"sasl.enabled.mechanisms: {', '.join(unsupported)} on listener {listener} is not supported "
            f"(Samsa supports {', '.join(SUPPORTED_MECHANISMS)})"
        )
    plain_users: dict[str, str] = {}
    for mechanism in mechanisms:
        setting = f"{prefix}.{mechanism.lower()}.sasl.jaas.config"
        jaas = config.for_listener(listener, "sasl.jaas.config", mechanism)
        if jaas is None or not str(jaas).strip():
            if mechanism == PLAIN:
                raise ConfigError(
                    f"{setting} is required: the PLAIN users of listener {listener} are its "
                    f'{PLAIN_LOGIN_MODULE} options user_<name>="<password>"'
                )
            continue  # SCRAM's users are in ZooKeeper; the entry only holds the broker's own login
        try:
            entry = parse_single_entry(str(jaas))
        except JaasError as e:
            raise ConfigError(f"{setting} is invalid: {e}") from None
        expected = LOGIN_MODULES[mechanism]
        if entry.login_module != expected:
            raise ConfigError(
                f"{setting} names the login module {entry.login_module}; {mechanism} needs {expected}"
            )
        if mechanism == PLAIN:
            plain_users = {
                key[len(JAAS_USER_PREFIX) :]: value
                for key, value in entry.options.items()
                if key.startswith(JAAS_USER_PREFIX)
            }
    if credentials is None and any(m != PLAIN for m in mechanisms):
        log.warning(
            "listener %s enables SCRAM but this server has no SCRAM credentials: SCRAM clients cannot log in",
            listener,
        )
    return SaslListenerSettings(
        listener=listener,
        mechanisms=mechanisms,
        plain_users=plain_users,
        credentials=credentials,
        reauth_ms={m: int(config.for_listener(listener, "connections.max.reauth.ms", m)) for m in mechanisms},
        max_receive_size=int(config.for_listener(listener, "sasl.server.max.receive.size")),
        failed_delay_ms=int(config["connection.failed.authentication.delay.ms"]),
    )


def authenticator_factory(
    config: Any, listener: str, credentials: ScramCredentialLookup | None
) -> Callable[[Connection], SaslServerAuthenticator]:
    """The factory of the authenticators of ``listener``'s connections (ConfigError when its SASL
    settings are wrong: the server does not start)."""
    settings = listener_settings(config, listener, credentials)

    def make(connection: Connection) -> SaslServerAuthenticator:
        return SaslServerAuthenticator(connection, settings)

    return make


class SaslServerAuthenticator:
    """One connection's SASL state: the gate (``admit``) and the exchange (``handshake``,
    ``authenticate``)."""

    def __init__(self, connection: Connection, settings: SaslListenerSettings) -> None:
        self.connection = connection
        self.settings = settings
        self.state = SaslState.HANDSHAKE
        self.raw_tokens = False  # SaslHandshake v0: tokens come without a Kafka header
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        self.session_expires_at: float | None = None  # time.monotonic(); None: never
        self.client_supports_reauthentication = False  # it used SaslAuthenticate v1+
        self._reauthenticating_principal: KafkaPrincipal | None = None
        self._bad_reauth_mechanism: str | None = None
        self._last_reauth_start = 0.0
        # Until authenticated, a frame may be at most sasl.server.max.receive.size bytes.
        self._frame_limit = connection.reader.max_size
        connection.reader.max_size = min(self._frame_limit, settings.max_receive_size)

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def reauthenticating(self) -> bool:
        return self._reauthenticating_principal is not None

    def _text(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    # -- the gate ----------------------------------------------------------------------------------

    def admit(self, frame: Any) -> bool:
        """Whether the processor goes on with ``frame`` (decoding and queueing it); False when it
        was dealt with here: a raw token queued, a frame of a failed connection dropped, a request
        refused (the connection closing)."""
        state = self.state
        if state is SaslState.COMPLETE:
            expires_at = self.session_expires_at
            if expires_at is None:
                return True
            try:
                api_key, _, _ = peek_request(frame)
            except DecodeError:
                return True  # the processor refuses it
            if api_key == ApiKey.SASL_HANDSHAKE or time.monotonic() <= expires_at:
                return True
            log.info(
                "closing connection from %s: its SASL session expired (connections.max.reauth.ms) and it "
                "sent %s instead of re-authenticating",
                self.connection.peer,
                _api_name(api_key),
            )
            self.connection.close()
            return False
        if state is SaslState.FAILED:
            return False  # answered and closed after the delay; nothing more is read
        if state is SaslState.AUTHENTICATE and self.raw_tokens:
            self._enqueue_raw_token(frame)
            return False
        try:
            api_key, _, _ = peek_request(frame)
        except DecodeError:
            return True
        if api_key in _PRE_AUTH_APIS:
            return True
        during = "SASL handshake" if state is SaslState.HANDSHAKE else "SASL authentication"
        self._fail_and_close(f"Unexpected Kafka request of type {_api_name(api_key)} during {during}.")
        return False

    def _enqueue_raw_token(self, frame: Any) -> None:
        connection = self.connection
        body = SaslAuthenticateRequest(auth_bytes=bytes(frame))
        connection.enqueue(
            Request(connection, _SASL_AUTHENTICATE_API, 0, 0, None, body, len(frame) + 4, RAW_TOKEN)
        )

    # -- the exchange ------------------------------------------------------------------------------

    async def handshake(self, request: Request) -> Message | Parked | None:
        mechanism: str = request.body.mechanism
        enabled = list(self.settings.mechanisms)
        state = self.state
        if state is SaslState.COMPLETE:
            return self._maybe_begin_reauthentication(request, mechanism)
        if state is SaslState.AUTHENTICATE:
            return self._fail(
                request,
                "Unexpected Kafka request of type SASL_HANDSHAKE during SASL authentication.",
                SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled),
            )
        if state is SaslState.FAILED:
            return None
        if mechanism not in enabled:
            return self._fail(
                request,
                f"Unsupported SASL mechanism {mechanism} (enabled: {', '.join(enabled)})",
                SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled),
            )
        self._begin(mechanism, raw=request.version == 0)
        return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)

    def _begin(self, mechanism: str, raw: bool) -> None:
        self.mechanism = mechanism
        self.raw_tokens = raw
        if mechanism == PLAIN:
            self._server = PlainServer(self.settings.plain_users)
        else:
            self._server = ScramServer(mechanism, self.settings.credentials)
        self.state = SaslState.AUTHENTICATE

    def _maybe_begin_reauthentication(self, request: Request, mechanism: str) -> Message | Parked | None:
        """KIP-368, Kafka's KafkaChannel.maybeBeginServerReauthentication: only when sessions expire,
        at most once a second; otherwise the handshake is answered as Kafka's KafkaApis answers it."""
        now = time.monotonic()
        expires_at = self.session_expires_at
        if expires_at is None or now - self._last_reauth_start < MIN_REAUTH_INTERVAL_SECONDS:
            if expires_at is not None and now > expires_at:
                log.info(
                    "closing connection from %s: its SASL session expired (connections.max.reauth.ms)",
                    self.connection.peer,
                )
                self.connection.close()
                return None
            return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
        self._last_reauth_start = now
        enabled = list(self.settings.mechanisms)
        previous = self.mechanism
        self._reauthenticating_principal = self.connection.principal
        if mechanism not in enabled:
            return self._fail(
                request,
                f"Unsupported SASL mechanism {mechanism} (enabled: {', '.join(enabled)})",
                SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled),
            )
        if mechanism != previous:
            # Kafka's REAUTH_BAD_MECHANISM: the handshake succeeds, the SaslAuthenticate that follows fails.
            self._bad_reauth_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication "
                f"of mechanism '{previous}'"
            )
            self.state = SaslState.AUTHENTICATE
            self.raw_tokens = request.version == 0
            return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)
        log.debug("connection from %s re-authenticating (%s)", self.connection.peer, mechanism)
        self._begin(mechanism, raw=request.version == 0)
        return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)

    async def authenticate(self, request: Request) -> Message | Parked | None:
        raw = request.requested_version == RAW_TOKEN
        state = self.state
        if state is SaslState.COMPLETE:
            return SaslAuthenticateResponse(
                error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=_AFTER_AUTHENTICATION
            )
        if state is SaslState.FAILED:
            return None
        if state is SaslState.HANDSHAKE:
            message = "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake."
            return self._fail(
                request,
                message,
                SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=message),
            )
        if not raw and request.version > 0:
            self.client_supports_reauthentication = True
        if self._bad_reauth_mechanism is not None:
            message = self._bad_reauth_mechanism
            return self._fail(
                request,
                message,
                None
                if raw
                else SaslAuthenticateResponse(
                    error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message
                ),
            )
        server = self._server
        assert server is not None
        try:
            token = await server.evaluate_response(request.body.auth_bytes)
            if server.complete:
                assert server.authorization_id is not None
                principal = KafkaPrincipal(USER_TYPE, server.authorization_id)
                previous = self._reauthenticating_principal
                if previous is not None and principal != previous:
                    message = (
                        f"Cannot change principals during re-authentication from {previous.principal_type}."
                        f"{previous.name}: {principal.principal_type}.{principal.name}"
                    )
                    raise SaslFailure(message, message)
        except SaslFailure as e:
            message = e.client_message or (
                f"Authentication failed during {self._text()} due to invalid credentials with SASL "
                f"mechanism {self.mechanism}"
            )
            return self._fail(
                request,
                e.reason if e.client_message is None else message,
                None
                if raw
                else SaslAuthenticateResponse(
                    error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message
                ),
            )
        lifetime_ms = 0
        if server.complete:
            lifetime_ms = self._complete(principal)
        if raw:
            request.response = [SIZE.pack(len(token)), token]
            return None
        return SaslAuthenticateResponse(
            error_code=ErrorCode.NONE, error_message=None, auth_bytes=token, session_lifetime_ms=lifetime_ms
        )

    def _complete(self, principal: KafkaPrincipal) -> int:
        """The exchange succeeded: the connection is ``principal``; the session's lifetime (ms, 0: none)."""
        assert self.mechanism is not None
        connection = self.connection
        lifetime_ms = max(0, self.settings.reauth_ms.get(self.mechanism, 0))
        self.session_expires_at = time.monotonic() + lifetime_ms / 1000 if lifetime_ms else None
        was = "re-authenticated" if self.reauthenticating else "authenticated"
        connection.principal = principal
        connection.reader.max_size = self._frame_limit
        self.state = SaslState.COMPLETE
        self.raw_tokens = False
        self._server = None
        self._reauthenticating_principal = None
        log.debug(
            "connection from %s on listener %s %s as %s (SASL %s)%s",
            connection.peer,
            self.settings.listener,
            was,
            principal,
            self.mechanism,
            f"; session lifetime {lifetime_ms} ms" if lifetime_ms else "",
        )
        return lifetime_ms

    # -- failures ----------------------------------------------------------------------------------

    def _log_failure(self, reason: str) -> None:
        # Kafka's Selector: "Failed authentication with <peer> (<message>)", at INFO.
        log.info(
            "Failed %s with %s on listener %s (%s); closing the connection",
            self._text(),
            self.connection.peer,
            self.settings.listener,
            reason,
        )

    def _fail(self, request: Request, reason: str, response: Message | None) -> Parked:
        """The exchange failed: ``response`` (None: none) is sent after the failure delay, then the
        connection is closed."""
        self.state = SaslState.FAILED
        self._server = None
        self._log_failure(reason)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Message | None] = loop.create_future()
        connection = self.connection

        def respond_and_close() -> None:
            if not answer.done():
                answer.set_result(response)
            # After the response's own callbacks (which write it): call_soon runs in order.
            loop.call_soon(connection.close)

        loop.call_later(self.settings.failed_delay_ms / 1000, respond_and_close)
        return Parked(answer)

    def _fail_and_close(self, reason: str) -> None:
        """A failure found by the gate: no response, the connection closed after the delay."""
        self.state = SaslState.FAILED
        self._server = None
        self._log_failure(reason)
        asyncio.get_running_loop().call_later(self.settings.failed_delay_ms / 1000, self.connection.close)


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"


# -- the handlers ----------------------------------------------------------------------------------


async def handle_sasl_handshake(request: Request) -> Message | Parked | None:
    authenticator: SaslServerAuthenticator | None = getattr(request.connection, "authenticator", None)
    if authenticator is None:  # not a SASL listener: Kafka's KafkaApis.handleSaslHandshakeRequest
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    return await authenticator.handshake(request)


async def handle_sasl_authenticate(request: Request) -> Message | Parked | None:
    authenticator: SaslServerAuthenticator | None = getattr(request.connection, "authenticator", None)
    if authenticator is None:  # Kafka's KafkaApis.handleSaslAuthenticateRequest
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=_AFTER_AUTHENTICATION
        )
    return await authenticator.authenticate(request)


def sasl_handlers() -> dict[int, Handler]:
    """SaslHandshake and SaslAuthenticate, for a broker's or a controller's request handler."""
    return {ApiKey.SASL_HANDSHAKE: handle_sasl_handshake, ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate}
