"""How the acceptor sets up an accepted socket: socket.send/receive.buffer.bytes (a unit test on real
sockets)."""

from __future__ import annotations

import socket

import pytest

from network.acceptor import configure_accepted


def _buffers(sock: socket.socket) -> tuple[int, int]:
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), sock.getsockopt(
        socket.SOL_SOCKET, socket.SO_RCVBUF
    )


@pytest.fixture
def accepted():
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        sock, _ = server.accept()
        with client, sock:
            yield sock


def test_buffers_stay_with_the_kernel_at_minus_one(accepted: socket.socket) -> None:
    before = _buffers(accepted)
    configure_accepted(accepted, -1, -1)
    assert _buffers(accepted) == before
    assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    assert not accepted.getblocking()


def test_positive_sizes_are_set(accepted: socket.socket) -> None:
    configure_accepted(accepted, 102400, 65536)
    # Linux doubles what it is given, for its own bookkeeping.
    assert _buffers(accepted) == (2 * 102400, 2 * 65536)
