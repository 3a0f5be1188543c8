"""NetworkClient against a scripted server on a real socket: responses arriving in pieces or together,
pipelined requests answered in order, and every way a connection can fail the requests in flight
(then the next request reconnects)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from network.client import NetworkClient
from protocol.api import ApiKey, api
from protocol.frame import encode_response, peek_request
from protocol.framing import SIZE
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse

API_VERSIONS = api(ApiKey.API_VERSIONS)
Script = Callable[[int, int], list[bytes]]  # (request number, correlation id) -> chunks to send back


def _answer(correlation_id: int, error_code: int = 0) -> bytes:
    body = ApiVersionsResponse(error_code=error_code, api_keys=[], throttle_time_ms=0)
    return b"".join(bytes(part) for part in encode_response(API_VERSIONS, 3, correlation_id, body))


@pytest.fixture
async def server() -> AsyncIterator[Callable[[Script], asyncio.Future[int]]]:
    """``await start(script)`` runs a server answering each request as ``script`` says; its port."""
    servers: list[asyncio.Server] = []

    async def start(script: Script) -> int:
        count = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal count
            try:
                while True:
                    size = SIZE.unpack(await reader.readexactly(4))[0]
                    frame = await reader.readexactly(size)
                    _, _, correlation_id = peek_request(frame)
                    count += 1
                    for chunk in script(count, correlation_id):
                        if not chunk:
                            writer.close()
                            return
                        writer.write(chunk)
                        await writer.drain()
                        await asyncio.sleep(0.01)
            except asyncio.IncompleteReadError:
                writer.close()

        found = await asyncio.start_server(serve, "127.0.0.1", 0)
        servers.append(found)
        return found.sockets[0].getsockname()[1]

    yield start  # type: ignore[misc]
    for found in servers:
        found.close()


async def _ask(client: NetworkClient) -> ApiVersionsResponse:
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    return await client.send(API_VERSIONS, 3, request)


async def test_a_response_arriving_byte_by_byte_is_reassembled(server) -> None:
    port = await server(lambda _, cid: [bytes([b]) for b in _answer(cid)])
    client = NetworkClient("127.0.0.1", port, "t", request_timeout=10)
    try:
        assert (await _ask(client)).error_code == 0
    finally:
        await client.close()


async def test_pipelined_requests_get_their_own_answers_in_order(server) -> None:
    port = await server(lambda n, cid: [_answer(cid, error_code=n)])
    client = NetworkClient("127.0.0.1", port, "t", request_timeout=10)
    try:
        answers = await asyncio.gather(*(_ask(client) for _ in range(5)))
        assert [a.error_code for a in answers] == [1, 2, 3, 4, 5]
    finally:
        await client.close()


async def test_a_wrong_correlation_id_fails_the_connection_and_the_next_request_reconnects(server) -> None:
    port = await server(lambda n, cid: [_answer(cid + 1 if n == 1 else cid)])
    client = NetworkClient("127.0.0.1", port, "t", request_timeout=10)
    try:
        with pytest.raises(ConnectionError, match="correlation id"):
            await _ask(client)
        assert (await _ask(client)).error_code == 0
    finally:
        await client.close()


async def test_a_connection_closed_mid_response_fails_what_is_in_flight(server) -> None:
    port = await server(lambda n, cid: [_answer(cid)[:7], b""] if n == 1 else [_answer(cid)])
    client = NetworkClient("127.0.0.1", port, "t", request_timeout=10)
    try:
        with pytest.raises(ConnectionError, match="connection lost"):
            await _ask(client)
        assert (await _ask(client)).error_code == 0
    finally:
        await client.close()


async def test_a_request_without_an_answer_times_out(server) -> None:
    port = await server(lambda _, cid: [])
    client = NetworkClient("127.0.0.1", port, "t", request_timeout=0.3)
    try:
        with pytest.raises(TimeoutError):
            await _ask(client)
    finally:
        await client.close()


async def test_a_cancel_arriving_as_the_request_fails_ends_the_caller(server) -> None:
    """A shutdown cancels a replica fetcher whose request fails in the same loop turn: the fetcher must
    see the cancellation, not the failure it retries on (with Python 3.11's ``asyncio.wait_for`` it saw
    the failure, retried forever, and its broker never finished shutting down)."""
    port = await server(lambda _, cid: [])
    client = NetworkClient("127.0.0.1", port, "t", request_timeout=10)
    try:
        asking = asyncio.ensure_future(_ask(client))
        while not client._in_flight:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)  # the request waits on its response
        await client.close()  # fails the request in flight...
        asking.cancel()  # ...and the shutdown's cancel comes in the same turn
        with pytest.raises(asyncio.CancelledError):
            await asking
    finally:
        await client.close()
