"""An in-memory stand-in for ZkClient with what zk/user_configs.py uses: get, get_children, exists,
create (makepath, sequence), set and delete with versions, raising kazoo's exceptions as ZooKeeper
would. The real-ZooKeeper checks are in tests/integration/test_scram_credentials.py."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError


class FakeZk:
    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}
        self.sequence = 0
        self.before_write: Any = None  # called before each write (to simulate a concurrent writer)

    @staticmethod
    def _parent(path: str) -> str:
        return path.rsplit("/", 1)[0] or "/"

    def _children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(
            p[len(prefix) :] for p in self.nodes if p.startswith(prefix) and "/" not in p[len(prefix) :]
        )

    def _stat(self, version: int) -> SimpleNamespace:
        return SimpleNamespace(version=version, ctime=time.time() * 1000)

    async def get(self, path: str, timeout: float | None = None) -> tuple[bytes, Any] | None:
        if path not in self.nodes:
            return None
        data, version = self.nodes[path]
        return data, self._stat(version)

    async def get_children(self, path: str) -> list[str] | None:
        return self._children(path) if path in self.nodes else None

    async def exists(self, path: str) -> Any:
        return self._stat(self.nodes[path][1]) if path in self.nodes else None

    def _hook(self) -> None:
        if self.before_write is not None:
            hook, self.before_write = self.before_write, None
            hook()

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        self._hook()
        if sequence:
            path = f"{path}{self.sequence:010d}"
            self.sequence += 1
        parent = self._parent(path)
        if parent not in self.nodes:
            if not makepath:
                raise NoNodeError(parent)
            parts = parent.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                self.nodes.setdefault("/" + "/".join(parts[:i]), (b"", 0))
        if path in self.nodes:
            raise NodeExistsError(path)
        self.nodes[path] = (data, 0)
        return path

    async def set(self, path: str, data: bytes, version: int = -1) -> Any:
        self._hook()
        if path not in self.nodes:
            raise NoNodeError(path)
        current = self.nodes[path][1]
        if version not in (-1, current):
            raise BadVersionError(path)
        self.nodes[path] = (data, current + 1)
        return self._stat(current + 1)

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        self._hook()
        if path not in self.nodes:
            return
        if version not in (-1, self.nodes[path][1]):
            raise BadVersionError(path)
        if self._children(path):
            raise NotEmptyError(path)
        del self.nodes[path]

    def changes(self) -> list[bytes]:
        """The data of every /config/changes notification, in order."""
        return [self.nodes[f"/config/changes/{c}"][0] for c in self._children("/config/changes")]
