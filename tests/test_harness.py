"""The test harness itself: ports it hands out, chroots it gives clusters, the integration marker it
enforces."""

from __future__ import annotations

import pytest

from tests.support.cluster import chroot, free_port


def test_free_port_never_hands_out_a_port_twice() -> None:
    # A cluster takes all its ports before any process binds one; the kernel may offer a closed port
    # again, so the harness must remember what it gave.
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)


def test_every_cluster_gets_a_chroot_of_its_own() -> None:
    class Server:
        connect_string = "127.0.0.1:2181"

    given = [chroot(Server(), "t") for _ in range(3)]  # type: ignore[arg-type]
    assert len(set(given)) == 3 and all(c.startswith("127.0.0.1:2181/t-") for c in given)


class _Item:
    def __init__(self, nodeid: str, fixturenames: list[str], keywords: dict[str, object]) -> None:
        self.nodeid = nodeid
        self.fixturenames = fixturenames
        self.keywords = keywords
        self.markers: list[object] = []

    def add_marker(self, marker: object) -> None:
        self.markers.append(marker)


class _Config:
    def getoption(self, name: str) -> bool:
        return False


def test_collection_fails_for_a_test_starting_processes_without_the_integration_marker() -> None:
    from tests import conftest

    marked = _Item("t.py::marked", ["zookeeper", "zookeeper_server"], {"integration": True})
    pure = _Item("t.py::pure", ["tmp_path"], {})
    conftest.pytest_collection_modifyitems(_Config(), [marked, pure])  # type: ignore[arg-type]
    unmarked = _Item("t.py::unmarked", ["cluster", "zookeeper", "zookeeper_server"], {})
    with pytest.raises(pytest.UsageError, match=r"t\.py::unmarked"):
        conftest.pytest_collection_modifyitems(_Config(), [marked, unmarked, pure])  # type: ignore[arg-type]
