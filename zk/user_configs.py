"""User entity configs in ZooKeeper, where Kafka keeps SCRAM credentials.

Kafka (ZooKeeper mode) stores a user's SCRAM credentials as configs of the ``users`` entity
(``AdminZkClient.changeUserOrUserClientIdConfig``, ``ZkData.ConfigEntityZNode``):

- ``/config/users/<sanitized user>`` holds ``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,
  stored_key=...,server_key=...,iterations=8192"}}``, one entry per mechanism (the string form of
  ``ScramCredentialUtils``; see ``server_common/scram.py``); the node name is the user name
  URL-encoded by Kafka's ``Sanitizer`` (``*`` as ``%2A``, a space as ``%20``);
- every change is announced by a sequential ``/config/changes/config_change_<n>`` with
  ``{"version":2,"entity_path":"users/<sanitized user>"}``, which every broker watches (its
  ``ConfigChangeListener`` refreshes its ``CredentialCache``);
- a user left with no config and no child node is deleted (Kafka's ``tryCleanQuotaNodes``).

Unlike Kafka, whose read-modify-write of a user's configs is last-writer-wins, a change here is written
conditionally on the version read and retried, so two brokers altering different mechanisms of one
user at once both take effect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import unquote_plus

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from server_common.scram import SCRAM_SHA_512, ScramCredential
from zk import znodes
from zk.client import ZkClient

log = logging.getLogger(__name__)

USER_ENTITY = "users"
MAX_ATTEMPTS = 20

# java.net.URLEncoder leaves these alone; every other byte of the UTF-8 form becomes %XY.
_URL_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URLEncoder's form with ``*`` as ``%2A`` and space as ``%20``."""
    return "".join(chr(b) if b in _URL_SAFE else f"%{b:02X}" for b in name.encode("utf-8"))


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (URLDecoder: ``+`` is a space, ``%XY`` a byte)."""
    return unquote_plus(name, encoding="utf-8", errors="strict")


def user_config_path(user: str) -> str:
    return f"{znodes.CONFIG_USERS}/{sanitize(user)}"


class UserConfigs:
    """Reads and writes ``/config/users/<user>`` over a :class:`ZkClient`.

    It is also a ``ScramCredentialLookup`` reading ZooKeeper on every call (the controller's, which
    keeps no cache: it authenticates only its brokers' few connections)."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    async def read(self, user: str) -> tuple[dict[str, str], int | None]:
        """The user's configs and the node's version (None: there is no node)."""
        found = await self.zk.get(user_config_path(user))
        if found is None:
            return {}, None
        return znodes.decode_config(found[0]), found[1].version

    async def user_config(self, user: str) -> dict[str, str]:
        return (await self.read(user))[0]

    async def users(self) -> list[str]:
        """The users with a config node (names desanitized), sorted."""
        names = await self.zk.get_children(znodes.CONFIG_USERS) or []
        return sorted(desanitize(n) for n in names)

    async def all_user_configs(self) -> dict[str, dict[str, str]]:
        """Every user's configs (Kafka's ``fetchAllEntityConfigs("users")``)."""
        configs: dict[str, dict[str, str]] = {}
        for user in await self.users():
            configs[user] = await self.user_config(user)
        return configs

    async def alter(self, user: str, change: Callable[[dict[str, str]], dict[str, str]]) -> dict[str, str]:
        """Reads the user's configs, writes ``change(configs)`` if it differs, conditionally on the
        version read (retried when another writer got there first), then announces the change under
        ``/config/changes``. An exception from ``change`` aborts with nothing written. Returns the
        configs written."""
        path = user_config_path(user)
        for _ in range(MAX_ATTEMPTS):
            current, version = await self.read(user)
            new = change(dict(current))
            try:
                if version is None:
                    if not new:
                        return new
                    await self.zk.create(path, znodes.encode_config(new), makepath=True)
                elif not new and not await self.zk.get_children(path):
                    # Kafka's tryCleanQuotaNodes: no configs and no children -> no node.
                    await self.zk.delete(path, version)
                else:
                    await self.zk.set(path, znodes.encode_config(new), version)
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                continue  # changed meanwhile: read again
            await self.notify(user)
            log.info(
                "changed the configs of users/%s (now: %s)", sanitize(user), ", ".join(sorted(new)) or "none"
            )
            return new
        raise RuntimeError(
            f"The configs of user {user!r} kept changing; gave up after {MAX_ATTEMPTS} attempts"
        )

    async def notify(self, user: str) -> None:
        """Creates ``/config/changes/config_change_<n>`` naming ``users/<sanitized user>``."""
        await self.zk.create(
            f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}",
            znodes.encode_config_change(USER_ENTITY, sanitize(user)),
            sequence=True,
            makepath=True,
        )

    # -- SCRAM ----------------------------------------------------------------------------------

    async def set_scram_credential(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        def put(configs: dict[str, str]) -> dict[str, str]:
            configs[mechanism] = credential.to_string()
            return configs

        await self.alter(user, put)

    async def set_scram_password(
        self, user: str, password: str, mechanism: str = SCRAM_SHA_512, iterations: int = 4096
    ) -> ScramCredential:
        """Stores a new credential for ``password`` (what ``kafka-configs.sh --zookeeper ... --add-config
        'SCRAM-SHA-512=[password=...]'`` did), e.g. for brokers' own user before they start."""
        credential = ScramCredential.from_password(mechanism, password, iterations)
        await self.set_scram_credential(user, mechanism, credential)
        return credential

    async def delete_scram_credential(self, user: str, mechanism: str) -> bool:
        """Removes the user's credential for ``mechanism``; False if there was none."""
        removed = False

        def drop(configs: dict[str, str]) -> dict[str, str]:
            nonlocal removed
            removed = configs.pop(mechanism, None) is not None
            return configs

        current, _ = await self.read(user)
        if mechanism not in current:
            return False
        await self.alter(user, drop)
        return removed

    async def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        value = (await self.user_config(user)).get(mechanism)
        if value is None:
            return None
        try:
            return ScramCredential.from_string(value)
        except ValueError as e:
            log.warning(
                "ignoring the unreadable %s credential of user %s in ZooKeeper: %s", mechanism, user, e
            )
            return None

    async def __call__(self, mechanism: str, user: str) -> ScramCredential | None:
        return await self.scram_credential(mechanism, user)
