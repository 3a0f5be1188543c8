"""SASL listeners in process, over real sockets on uvloop (the server's loop): the gate before
authentication, SaslHandshake v0 (raw tokens) and v1, SaslAuthenticate v0-v2 with PLAIN and SCRAM, the
failures with Kafka's error codes answered after the failure delay and closed, the pre-authentication
frame limit, KIP-368 re-authentication (session lifetime, same principal, expired sessions closed) on
the server and in NetworkClient, and a PLAINTEXT listener answering ILLEGAL_SASL_STATE."""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

from broker.config import KafkaConfig
from network.client import NetworkClient, SaslAuthenticationError
from network.client_security import ClientSecurity
from network.request_channel import Request
from network.sasl_server import listener_settings, sasl_handlers
from network.socket_server import SocketServer
from protocol.api import ApiKey, api
from protocol.frame import decode_response, encode_request
from protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    Message,
    MetadataRequest,
    MetadataResponse,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from server_common.config import ConfigError
from server_common.scram import CredentialCache, ScramCredential

DELAY_MS = 150
LISTENER = "SASL_PLAINTEXT"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" '
    'user_bob="bob-secret";'
)
SERVED = {ApiKey.API_VERSIONS: (0, 4), ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2)}
SERVED[ApiKey.METADATA] = (0, 12)


def _run(coro: Callable[[], Awaitable[None]]) -> None:
    uvloop.run(coro())


def _supported(key: int) -> Any:
    if key not in SERVED:
        return None
    return (api(key), *SERVED[key])


class _Handler:
    """ApiVersions, Metadata (recording who asked) and the SASL handlers under test."""

    def __init__(self) -> None:
        self.principals: list[str] = []
        self.handshakes = 0
        self._sasl = sasl_handlers()

    async def handle(self, request: Request) -> Any:
        key = request.api.key
        if key in self._sasl:
            if key == ApiKey.SASL_HANDSHAKE:
                self.handshakes += 1
            return await self._sasl[key](request)
        if key == ApiKey.API_VERSIONS:
            return ApiVersionsResponse(error_code=0, api_keys=[])
        self.principals.append(str(request.principal))
        return MetadataResponse(brokers=[], topics=[])


def _credentials() -> CredentialCache:
    cache = CredentialCache()
    mechanisms = ("SCRAM-SHA-256", "SCRAM-SHA-512")
    cache.update_user(
        "alice", {m: ScramCredential.from_password(m, "alice-secret").to_string() for m in mechanisms}
    )
    return cache


def _server(handler: _Handler, **extra: str) -> SocketServer:
    config = KafkaConfig(
        {
            "broker.id": "1",
            "zookeeper.connect": "zk:2181",
            "listeners": f"{LISTENER}://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "connection.failed.authentication.delay.ms": str(DELAY_MS),
            **extra,
        }
    )
    server = SocketServer(config, handler, _supported, scram_credentials=_credentials())
    server.start_processing()
    return server


class _Raw:
    """Frames over one connection, as a client that needs exact bytes on the wire."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._cid = 0

    @classmethod
    async def connect(cls, port: int) -> _Raw:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    def send(self, key: int, version: int, body: Message) -> None:
        self._cid += 1
        self.writer.write(encode_request(api(key), version, self._cid, "t", body))

    def send_raw(self, token: bytes) -> None:
        self.writer.write(struct.pack(">i", len(token)) + token)

    async def frame(self, timeout: float = 5.0) -> bytes:
        async with asyncio.timeout(timeout):
            (size,) = struct.unpack(">i", await self.reader.readexactly(4))
            return await self.reader.readexactly(size)

    async def request(self, key: int, version: int, body: Message) -> Any:
        self.send(key, version, body)
        cid, response = decode_response(await self.frame(), api(key), version)
        assert cid == self._cid
        return response

    async def closed(self, timeout: float = 5.0) -> bool:
        try:
            async with asyncio.timeout(timeout):
                return await self.reader.read(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.writer.close()


async def _plain_login(raw: _Raw, user: str, password: str, version: int = 2) -> Any:
    handshake = await raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    assert handshake.error_code == 0
    token = f"\x00{user}\x00{password}".encode()
    return await raw.request(ApiKey.SASL_AUTHENTICATE, version, SaslAuthenticateRequest(auth_bytes=token))


def _security(mechanism: str, user: str = "alice", password: str = "alice-secret") -> ClientSecurity:
    return ClientSecurity.from_client_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
    )


async def _metadata(client: NetworkClient) -> Any:
    return await client.send(api(ApiKey.METADATA), 9, MetadataRequest(topics=[]))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_plain_authentication_makes_the_connection_its_user(version: int) -> None:
    async def main() -> None:
        handler = _Handler()
        server = _server(handler)
        raw = await _Raw.connect(server.bound_ports[LISTENER])
        try:
            versions = await raw.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t"))
            assert versions.error_code == 0
            handshake = await raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
            assert (handshake.error_code, handshake.mechanisms) == (
                0,
                ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
            )
            token = b"\x00alice\x00alice-secret"
            done = await raw.request(
                ApiKey.SASL_AUTHENTICATE, version, SaslAuthenticateRequest(auth_bytes=token)
            )
            assert (done.error_code, done.auth_bytes) == (0, b"")
            await raw.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
            assert handler.principals == ["User:alice"]
            # Once authenticated, the SASL APIs answer as Kafka's KafkaApis does.
            again = await raw.request(
                ApiKey.SASL_AUTHENTICATE, version, SaslAuthenticateRequest(auth_bytes=token)
            )
            assert again.error_code == 34
            assert again.error_message == "SaslAuthenticate request received after successful authentication"
            assert (
                await raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
            ).error_code == 34
        finally:
            raw.close()
            await server.shutdown()

    _run(main)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_network_client_authenticates_with_each_mechanism(mechanism: str) -> None:
    async def main() -> None:
        handler = _Handler()
        server = _server(handler)
        client = NetworkClient("127.0.0.1", server.bound_ports[LISTENER], "t", security=_security(mechanism))
        try:
            await _metadata(client)
            await _metadata(client)
            assert handler.principals == ["User:alice", "User:alice"]
            assert handler.handshakes == 1
        finally:
            await client.close()
            await server.shutdown()

    _run(main)


@pytest.mark.parametrize(
    ("mechanism", "user", "message"),
    [
        ("PLAIN", "alice", "Authentication failed: Invalid username or password"),
        ("PLAIN", "mallory", "Authentication failed: Invalid username or password"),
        (
            "SCRAM-SHA-512",
            "alice",
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-512",
        ),
        (
            "SCRAM-SHA-256",
            "mallory",
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-256",
        ),
    ],
)
def test_a_wrong_password_or_unknown_user_fails_after_the_delay_and_others_are_undisturbed(
    mechanism: str, user: str, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        handler = _Handler()
        server = _server(handler)
        port = server.bound_ports[LISTENER]
        good = NetworkClient("127.0.0.1", port, "good", security=_security(mechanism))
        bad = NetworkClient("127.0.0.1", port, "bad", security=_security(mechanism, user, "wrong-pw"))
        try:
            await _metadata(good)
            started = time.monotonic()
            with pytest.raises(SaslAuthenticationError) as failed:
                await _metadata(bad)
            assert time.monotonic() - started >= DELAY_MS / 1000 * 0.9
            assert "SASL_AUTHENTICATION_FAILED" in str(failed.value) and message in str(failed.value)
            await _metadata(good)
            assert handler.principals == ["User:alice", "User:alice"]
        finally:
            await good.close()
            await bad.close()
            await server.shutdown()

    with caplog.at_level(logging.INFO, logger="network.sasl_server"):
        _run(main)
    failures = [
        r.getMessage() for r in caplog.records if "Failed authentication with 127.0.0.1:" in r.getMessage()
    ]
    assert len(failures) == 1
    assert "wrong-pw" not in failures[0]


def test_a_request_before_authentication_closes_the_connection_after_the_delay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        handler = _Handler()
        server = _server(handler)
        raw = await _Raw.connect(server.bound_ports[LISTENER])
        try:
            started = time.monotonic()
            raw.send(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
            assert await raw.closed()
            assert time.monotonic() - started >= DELAY_MS / 1000 * 0.9
            assert handler.principals == []
            # The same after the handshake, in the middle of the exchange.
            raw = await _Raw.connect(server.bound_ports[LISTENER])
            assert (
                await raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
            ).error_code == 0
            raw.send(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
            assert await raw.closed()
            assert handler.principals == []
        finally:
            raw.close()
            await server.shutdown()

    with caplog.at_level(logging.INFO, logger="network.sasl_server"):
        _run(main)
    messages = [r.getMessage() for r in caplog.records]
    assert any("Unexpected Kafka request of type METADATA during SASL handshake" in m for m in messages)
    assert any("Unexpected Kafka request of type METADATA during SASL authentication" in m for m in messages)


def test_an_unsupported_mechanism_gets_33_with_the_enabled_list_then_a_close() -> None:
    async def main() -> None:
        server = _server(
            _Handler(), **{"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512"}
        )
        raw = await _Raw.connect(server.bound_ports[LISTENER])
        try:
            response = await raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
            assert (response.error_code, response.mechanisms) == (33, ["SCRAM-SHA-512"])
            assert await raw.closed()
        finally:
            raw.close()
            await server.shutdown()

    _run(main)


def test_the_exchange_out_of_order_is_illegal_sasl_state() -> None:
    async def main() -> None:
        server = _server(_Handler())
        port = server.bound_ports[LISTENER]
        raw = await _Raw.connect(port)
        try:
            early = await raw.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"x"))
            assert early.error_code == 34 and "during SASL handshake" in early.error_message
            assert await raw.closed()
            raw = await _Raw.connect(port)
            await raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
            twice = await raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
            assert twice.error_code == 34
            assert await raw.closed()
        finally:
            raw.close()
            await server.shutdown()

    _run(main)


def test_handshake_v0_exchanges_raw_tokens_without_kafka_headers() -> None:
    async def main() -> None:
        from network.sasl_mechanisms import ScramClient

        handler = _Handler()
        server = _server(handler)
        port = server.bound_ports[LISTENER]
        raw = await _Raw.connect(port)
        try:
            assert (
                await raw.request(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))
            ).error_code == 0
            raw.send_raw(b"\x00alice\x00alice-secret")
            assert await raw.frame() == b""  # PLAIN's empty challenge, as a zero-length frame
            await raw.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
            raw.close()
            raw = await _Raw.connect(port)
            await raw.request(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
            client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
            raw.send_raw(client.initial_response())
            final = client.evaluate_challenge(await raw.frame())
            assert final is not None
            raw.send_raw(final)
            assert client.evaluate_challenge(await raw.frame()) is None and client.complete
            await raw.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
            assert handler.principals == ["User:alice", "User:alice"]
            raw.close()
            # A wrong raw token: no response (raw framing has no error), a close after the delay.
            raw = await _Raw.connect(port)
            await raw.request(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))
            raw.send_raw(b"\x00alice\x00nope")
            assert await raw.closed()
        finally:
            raw.close()
            await server.shutdown()

    _run(main)


def test_a_frame_above_sasl_server_max_receive_size_before_authentication_closes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        handler = _Handler()
        server = _server(handler, **{"listener.name.sasl_plaintext.sasl.server.max.receive.size": "100"})
        port = server.bound_ports[LISTENER]
        raw = await _Raw.connect(port)
        big = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t" * 200)])
        try:
            raw.send(ApiKey.METADATA, 9, big)
            assert await raw.closed()
            raw = await _Raw.connect(port)
            assert (await _plain_login(raw, "alice", "alice-secret")).error_code == 0
            await raw.request(ApiKey.METADATA, 9, big)  # authenticated: the usual limit
            assert handler.principals == ["User:alice"]
        finally:
            raw.close()
            await server.shutdown()

    with caplog.at_level(logging.WARNING, logger="network.processor"):
        _run(main)
    assert any(
        "(sasl.server.max.receive.size, before SASL authentication)" in r.getMessage() for r in caplog.records
    )


def test_reauthentication_keeps_the_principal_and_an_expired_session_is_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        handler = _Handler()
        server = _server(handler, **{"listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "400"})
        port = server.bound_ports[LISTENER]
        raw = await _Raw.connect(port)
        try:
            assert (await _plain_login(raw, "alice", "alice-secret")).session_lifetime_ms == 400
            # KIP-368: a new exchange on the connection, the same mechanism and user.
            assert (await _plain_login(raw, "alice", "alice-secret")).session_lifetime_ms == 400
            await raw.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
            # Re-authenticating as someone else fails.
            other = await _Raw.connect(port)
            await _plain_login(other, "alice", "alice-secret")
            changed = await _plain_login(other, "bob", "bob-secret")
            assert changed.error_code == 58
            assert (
                changed.error_message
                == "Cannot change principals during re-authentication from User.alice: User.bob"
            )
            assert await other.closed()
            # So does another mechanism.
            other = await _Raw.connect(port)
            await _plain_login(other, "alice", "alice-secret")
            switch = await other.request(
                ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256")
            )
            assert switch.error_code == 0
            refused = await other.request(
                ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"x")
            )
            assert refused.error_code == 58 and "not supported for re-authentication" in refused.error_message
            # Past the session's lifetime, anything but re-authentication closes the connection.
            await asyncio.sleep(0.45)
            raw.send(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
            assert await raw.closed()
            assert handler.principals == ["User:alice"]
        finally:
            raw.close()
            await server.shutdown()

    with caplog.at_level(logging.INFO, logger="network.sasl_server"):
        _run(main)
    assert any("SASL session expired" in r.getMessage() for r in caplog.records)


def test_network_client_reauthenticates_before_its_session_expires() -> None:
    async def main() -> None:
        handler = _Handler()
        server = _server(
            handler, **{"listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": "1200"}
        )
        client = NetworkClient(
            "127.0.0.1", server.bound_ports[LISTENER], "t", security=_security("SCRAM-SHA-256")
        )
        try:
            await _metadata(client)
            transport = client._transport
            await asyncio.sleep(1.15)  # past 95% of the lifetime, before it ends
            await _metadata(client)
            await asyncio.sleep(0.5)  # past the first session's end: the new one still holds
            await _metadata(client)
            assert client._transport is transport  # the same connection, re-authenticated
            assert handler.handshakes >= 2  # one at least to re-authenticate (two under a slow loop)
            assert handler.principals == ["User:alice"] * 3
        finally:
            await client.close()
            await server.shutdown()

    _run(main)


def test_a_plaintext_listener_answers_the_sasl_apis_with_illegal_sasl_state() -> None:
    async def main() -> None:
        handler = _Handler()
        server = _server(handler)
        raw = await _Raw.connect(server.bound_ports["PLAINTEXT"])
        try:
            handshake = await raw.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
            assert (handshake.error_code, handshake.mechanisms) == (34, [])
            auth = await raw.request(ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=b""))
            assert auth.error_code == 34
            await raw.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
            assert handler.principals == ["User:ANONYMOUS"]
        finally:
            raw.close()
            await server.shutdown()

    _run(main)


def _config(**extra: str) -> KafkaConfig:
    return KafkaConfig(
        {
            "broker.id": "1",
            "zookeeper.connect": "zk:2181",
            "listeners": f"{LISTENER}://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            **extra,
        }
    )


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({}, "listener.name.sasl_plaintext.plain.sasl.jaas.config is required"),
        (
            {"listener.name.sasl_plaintext.plain.sasl.jaas.config": "a.B required;"},
            "listener.name.sasl_plaintext.plain.sasl.jaas.config names the login module a.B",
        ),
        (
            {"listener.name.sasl_plaintext.plain.sasl.jaas.config": "a.B required x=;"},
            "listener.name.sasl_plaintext.plain.sasl.jaas.config is invalid: Value not specified for key 'x'",
        ),
    ],
)
def test_a_plain_listener_without_a_good_jaas_config_does_not_start(
    extra: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.").replace("'", ".")):
        listener_settings(_config(**extra), LISTENER, None)


def test_listener_settings_read_per_listener_and_mechanism() -> None:
    config = _config(
        **{
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": "60000",
            "connections.max.reauth.ms": "1000",
        }
    )
    settings = listener_settings(config, LISTENER, None)
    assert settings.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert settings.plain_users == {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
    assert dict(settings.reauth_ms) == {"PLAIN": 1000, "SCRAM-SHA-512": 60000}
    assert (settings.max_receive_size, settings.failed_delay_ms) == (524288, 100)


def test_the_controller_serves_the_sasl_apis() -> None:
    from types import SimpleNamespace

    from controller.apis import ControllerApis
    from protocol.api_versions import ADVERTISED_VERSIONS
    from server_common.principal import ANONYMOUS

    controller_apis = ControllerApis(SimpleNamespace())  # type: ignore[arg-type]
    for key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
        assert controller_apis.supported(key) == (api(key), *ADVERTISED_VERSIONS[key])
    connection = SimpleNamespace(
        principal=ANONYMOUS, authenticator=None, peer="p", listener="L", client_ip="p"
    )
    request = Request(
        connection, api(ApiKey.SASL_HANDSHAKE), 1, 1, "c", SaslHandshakeRequest(mechanism="PLAIN"), 10, 1
    )  # type: ignore[arg-type]
    response = asyncio.run(controller_apis.handle(request))
    assert response.error_code == 34  # type: ignore[union-attr]
