"""The test harness itself: ports it hands out."""

from __future__ import annotations

from tests.harness import free_port


def test_free_port_never_hands_out_a_port_twice() -> None:
    # A cluster takes all its ports before any process binds one; the kernel may offer a closed port
    # again, so the harness must remember what it gave.
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)
