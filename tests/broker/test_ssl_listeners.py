"""TLS listeners in process, over real sockets on uvloop (the server's loop): the handshake, the mTLS
principal, clean closes logged with the peer for a certificate from another CA, a plaintext client on a
TLS port, a TLS client on a plaintext port and a client that never handshakes, other connections
undisturbed; and a Fetch's file regions written through the TLS transport instead of sendfile."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from broker.config import KafkaConfig
from network.client import NetworkClient
from network.client_security import ClientSecurity
from network.listener_security import ListenerSecurity
from network.processor import Connection, Processor
from network.request_channel import Request, RequestChannel
from network.socket_server import SocketServer
from network.ssl_context import SslSettings, client_context, server_context
from protocol.api import ApiKey, api
from protocol.frame import encode_response
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse, FetchResponse
from tools.certificates import create_ca, issue_certificate

VERSIONS = api(ApiKey.API_VERSIONS)
REQUEST = ApiVersionsRequest(client_software_name="t", client_software_version="1")


def _run(coro: Callable[[], Awaitable[None]]) -> None:
    uvloop.run(coro())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("pki")
    ca = create_ca(directory)
    other = create_ca(directory / "other", "Other CA")
    return {
        "ca": ca,
        "broker": issue_certificate(
            ca, directory, "broker", ["localhost"], ["127.0.0.1"], pkcs12_password="pw"
        ),
        "alice": issue_certificate(ca, directory, "alice", client=True, subject="CN=alice,OU=eng,O=Acme"),
        "mallory": issue_certificate(other, directory / "other", "mallory", client=True),
    }


class _Handler:
    def __init__(self) -> None:
        self.principals: list[str] = []

    async def handle(self, request: Request) -> ApiVersionsResponse:
        self.principals.append(str(request.principal))
        return ApiVersionsResponse(error_code=0, api_keys=[])


def _server(pki: dict[str, Any], handler: _Handler, **extra: str) -> SocketServer:
    config = KafkaConfig(
        {
            "broker.id": "1",
            "zookeeper.connect": "zk:2181",
            "listeners": "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(pki["broker"].pkcs12_path),
            "ssl.keystore.password": "pw",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki["ca"].cert_path),
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=.*$/$1/L,DEFAULT",
            **extra,
        }
    )
    server = SocketServer(config, handler, lambda key: (VERSIONS, 0, 4) if key == 18 else None)  # type: ignore[arg-type]
    server.start_processing()
    return server


def _client_security(pki: dict[str, Any], who: str) -> ClientSecurity:
    return ClientSecurity.from_client_properties(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki["ca"].cert_path),
            "ssl.certificate.location": str(pki[who].cert_path),
            "ssl.key.location": str(pki[who].key_path),
        }
    )


async def _versions(port: int, security: ClientSecurity | None, host: str = "localhost") -> Any:
    client = NetworkClient(host, port, "t", security=security, connect_timeout=5, request_timeout=5)
    try:
        return await client.send(VERSIONS, 3, REQUEST)
    finally:
        await client.close()


def test_an_mtls_client_is_served_as_its_mapped_certificate_name(pki: dict[str, Any]) -> None:
    async def main() -> None:
        handler = _Handler()
        server = _server(pki, handler)
        try:
            response = await _versions(server.bound_ports["SSL"], _client_security(pki, "alice"))
            assert response.error_code == 0
            assert handler.principals == ["User:alice"]
            await _versions(server.bound_ports["PLAINTEXT"], None)
            assert handler.principals[-1] == "User:ANONYMOUS"
        finally:
            await server.shutdown()

    _run(main)


def test_the_default_rule_gives_the_whole_dn_and_requested_auth_lets_a_certless_client_in(
    pki: dict[str, Any],
) -> None:
    async def main() -> None:
        handler = _Handler()
        server = _server(
            pki, handler, **{"ssl.client.auth": "requested", "ssl.principal.mapping.rules": "DEFAULT"}
        )
        try:
            await _versions(server.bound_ports["SSL"], _client_security(pki, "alice"))
            anonymous = ClientSecurity.from_client_properties(
                {"security.protocol": "SSL", "ssl.ca.location": str(pki["ca"].cert_path)}
            )
            await _versions(server.bound_ports["SSL"], anonymous, host="127.0.0.1")
            assert handler.principals == ["User:CN=alice,OU=eng,O=Acme", "User:ANONYMOUS"]
        finally:
            await server.shutdown()

    _run(main)


def test_bad_peers_are_closed_and_logged_and_others_are_undisturbed(
    pki: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="network.processor")

    async def main() -> None:
        handler = _Handler()
        server = _server(pki, handler)
        tls_port, plain_port = server.bound_ports["SSL"], server.bound_ports["PLAINTEXT"]
        alice = _client_security(pki, "alice")
        # a connection open all along
        steady = NetworkClient("localhost", tls_port, "steady", security=alice, request_timeout=5)
        try:
            await steady.send(VERSIONS, 3, REQUEST)
            with pytest.raises(ConnectionError):  # a client certificate from another CA
                await _versions(tls_port, _client_security(pki, "mallory"))
            no_certificate = ClientSecurity.from_client_properties(
                {"security.protocol": "SSL", "ssl.ca.location": str(pki["ca"].cert_path)}
            )
            with pytest.raises(ConnectionError):  # no client certificate where one is required
                await _versions(tls_port, no_certificate)
            with pytest.raises(ConnectionError):  # a plaintext client on the TLS listener
                await _versions(tls_port, None)
            with pytest.raises(OSError):  # a TLS client on the plaintext listener
                await _versions(plain_port, alice)
            assert (await steady.send(VERSIONS, 3, REQUEST)).error_code == 0
            assert (await _versions(tls_port, alice)).error_code == 0
            await asyncio.sleep(0.1)
            assert server.quotas.total == 1  # only the steady connection remains counted
        finally:
            await steady.close()
            await server.shutdown()

    _run(main)
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        "on listener SSL: TLS handshake failed" in m and "CERTIFICATE_VERIFY_FAILED" in m for m in messages
    )
    assert any("TLS handshake failed: PEER_DID_NOT_RETURN_A_CERTIFICATE" in m for m in messages)
    assert any("a plaintext client on this TLS listener?" in m for m in messages)
    assert any("a TLS client on this non-TLS listener?" in m for m in messages)
    assert all("127.0.0.1:" in m for m in messages)


def test_a_client_that_never_handshakes_is_closed_after_the_handshake_timeout(
    pki: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="network.processor")

    async def main() -> None:
        server = _server(pki, _Handler())
        try:
            for acceptor in server.acceptors:
                acceptor.security = dataclasses.replace(acceptor.security, ssl_handshake_timeout=0.3)
            loop = asyncio.get_running_loop()
            silent = socket.socket()
            silent.setblocking(False)
            await loop.sock_connect(silent, ("127.0.0.1", server.bound_ports["SSL"]))
            assert await asyncio.wait_for(loop.sock_recv(silent, 10), 5) == b""
            silent.close()
        finally:
            await server.shutdown()

    _run(main)
    assert any(
        "TLS handshake failed" in (m := r.getMessage()) and "longer than 0.3 seconds" in m
        for r in caplog.records
    )


def test_a_bad_key_store_stops_the_server_naming_the_setting(pki: dict[str, Any]) -> None:
    from server_common.config import ConfigError

    async def main() -> None:
        with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
            _server(pki, _Handler(), **{"ssl.keystore.password": "wrong"})
        with pytest.raises(ConfigError, match=r"ssl\.principal\.mapping\.rules"):
            _server(pki, _Handler(), **{"ssl.principal.mapping.rules": "RULE:nope"})

    _run(main)


def test_file_regions_go_through_the_tls_transport_not_sendfile(
    pki: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Region:
        def __init__(self, fd: int, position: int, length: int, records: memoryview) -> None:
            self.fd, self.position, self.length, self.records = fd, position, length, records

        def __len__(self) -> int:
            return self.length

    def no_sendfile(*args: object) -> int:
        raise AssertionError("sendfile on a TLS connection")

    monkeypatch.setattr(os, "sendfile", no_sendfile)
    data = os.urandom(3 << 20)
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"junk" + data)
    fd = os.open(segment, os.O_RDONLY)
    view = memoryview(segment.read_bytes())
    server_ctx = server_context(
        SslSettings(
            keystore_type="PKCS12", keystore_location=str(pki["broker"].pkcs12_path), keystore_password="pw"
        )
    )
    client_ctx = client_context(
        SslSettings(truststore_type="PEM", truststore_location=str(pki["ca"].cert_path))
    )

    class Receiver(asyncio.Protocol):
        def __init__(self) -> None:
            self.data = bytearray()
            self.transport: Any = None

        def connection_made(self, transport: Any) -> None:
            self.transport = transport

        def data_received(self, chunk: bytes) -> None:
            self.data += chunk

    async def main() -> None:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        processor = Processor(0, RequestChannel(10), lambda key: (VERSIONS, 0, 4), 1 << 20, lambda ip: None)
        security = ListenerSecurity("SSL", "SSL", server_ctx)
        accepted = loop.create_task(
            loop.connect_accepted_socket(
                lambda: Connection(processor, "SSL", "x", security), ours, ssl=server_ctx
            )
        )
        receiver = Receiver()
        await loop.create_connection(
            lambda: receiver, sock=theirs, ssl=client_ctx, server_hostname="localhost"
        )
        transport, _ = await accepted
        connection = transport.get_protocol()  # uvloop returns its SSLProtocol; the transport knows ours
        assert connection.tls
        fetch = api(ApiKey.FETCH)
        requests = [Request(connection, fetch, 12, i, "c", None, 0, 12) for i in range(3)]
        for r in requests:
            connection.enqueue(r)
            connection.handled(r)
        body = None
        for i, r in enumerate(requests):
            partition = FetchResponse.PartitionData(
                partition_index=i, records=Region(fd, 4, len(data), view[4:])
            )
            body = FetchResponse(
                responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])]
            )
            connection.complete(r, body)
        frame_size = sum(len(p) for p in encode_response(fetch, 12, 0, body))
        receiver.transport.pause_reading()  # a slow reader: the broker must wait for the transport to drain
        await asyncio.sleep(0.2)
        receiver.transport.resume_reading()
        for _ in range(500):
            if len(receiver.data) >= 3 * frame_size:
                break
            await asyncio.sleep(0.02)
        received = receiver.data
        pos = 0
        for i in range(3):
            size = struct.unpack_from(">i", received, pos)[0]
            frame = bytes(received[pos + 4 : pos + 4 + size])
            pos += 4 + size
            assert struct.unpack_from(">i", frame)[0] == i
            assert bytes(FetchResponse.decode(frame[5:], 12).responses[0].partitions[0].records) == data
        connection.close()
        receiver.transport.close()

    try:
        _run(main)
    finally:
        os.close(fd)


def test_uvloop_tls_runs_openssl_over_memory_bios_so_kernel_tls_never_engages(pki: dict[str, Any]) -> None:
    """The kernel-TLS finding (docs/security.md): uvloop's TLS transport drives an SSLObject over
    memory BIOs, so even with OpenSSL's SSL_OP_ENABLE_KTLS (bit 3; Python 3.11 has no name for it) the
    socket never gets the kernel's "tls" upper layer protocol, and sendfile could not encrypt."""
    tcp_ulp, op_enable_ktls = 31, 1 << 3
    server_ctx = server_context(
        SslSettings(
            keystore_type="PKCS12", keystore_location=str(pki["broker"].pkcs12_path), keystore_password="pw"
        )
    )
    server_ctx.options |= op_enable_ktls
    client_ctx = client_context(
        SslSettings(truststore_type="PEM", truststore_location=str(pki["ca"].cert_path))
    )

    async def main() -> None:
        seen: asyncio.Future[tuple[str, bytes]] = asyncio.get_running_loop().create_future()

        async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            ulp = sock.getsockopt(socket.IPPROTO_TCP, tcp_ulp, 16)
            seen.set_result((type(writer.get_extra_info("ssl_object")).__name__, ulp))
            writer.close()

        server = await asyncio.start_server(on_connection, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
        )
        kind, ulp = await asyncio.wait_for(seen, 5)
        writer.close()
        server.close()
        assert kind == "SSLObject" and ulp.strip(b"\0") == b""

    _run(main)
