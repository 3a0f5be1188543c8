"""SCRAM credentials: Kafka's credential string, credentials derived as Kafka's ScramFormatter derives
them (checked against RFC 7677's exchange), the CredentialCache, /config/users/<user> in Kafka's format
with its change notification, and the broker's config change listener refreshing the cache."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from types import SimpleNamespace
from typing import Any, cast

import pytest
import scramp

from broker.config_listener import ConfigChangeListener
from server_common.scram import (
    MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    CredentialCache,
    ScramCredential,
    ScramCredentialLookup,
    secure_random_salt,
)
from tests.broker.fake_user_zk import FakeZk
from zk.user_configs import UserConfigs, desanitize, sanitize, user_config_path

RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def users(zk: FakeZk) -> UserConfigs:
    return UserConfigs(cast(Any, zk))


def test_credential_string_is_kafkas_form_and_round_trips() -> None:
    credential = ScramCredential(b"salt", b"stored", b"server", 8192)
    text = credential.to_string()
    assert text == "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192"
    assert ScramCredential.from_string(text) == credential
    # Kafka reads the fields in any order.
    assert (
        ScramCredential.from_string("iterations=8192,server_key=c2VydmVy,salt=c2FsdA==,stored_key=c3RvcmVk")
        == credential
    )


@pytest.mark.parametrize(
    "text",
    [
        "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy",  # a field missing
        "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=1,extra=1",  # one too many
        "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=many",
        "salt=!!,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096",
        "=x,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096",
        "",
    ],
)
def test_malformed_credential_strings_are_refused_without_echoing_them(text: str) -> None:
    with pytest.raises(ValueError, match="Credentials not valid") as info:
        ScramCredential.from_string(text)
    assert "c3RvcmVk" not in str(info.value)


def test_credential_repr_hides_the_keys() -> None:
    credential = ScramCredential.from_password(SCRAM_SHA_512, "secret", 4096)
    assert "salt" not in repr(credential) and "key" not in repr(credential)
    assert repr(credential) == "ScramCredential(iterations=4096)"


def test_credential_from_password_verifies_rfc7677_exchange() -> None:
    """The stored and server keys made from "pencil" accept RFC 7677's client proof and give its server
    signature (Kafka's ScramFormatterTest.rfc7677Example)."""
    credential = ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096, RFC7677_SALT)
    client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    client_final_no_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    auth = f"{client_first_bare},{server_first},{client_final_no_proof}".encode()
    signature = hmac.new(credential.stored_key, auth, "sha256").digest()
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    assert hashlib.sha256(client_key).digest() == credential.stored_key
    server_signature = hmac.new(credential.server_key, auth, "sha256").digest()
    assert base64.b64encode(server_signature).decode() == "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize("name", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_credential_matches_what_scramp_derives(name: str) -> None:
    """The SASL server (scramp) and this module agree on the keys for every mechanism."""
    credential = ScramCredential.from_password(name, "alice-secret", 8192, b"some-salt-of-16b")
    salt, stored_key, server_key, iterations = scramp.ScramMechanism(name).make_auth_info(
        "alice-secret", 8192, b"some-salt-of-16b"
    )
    assert (credential.salt, credential.stored_key, credential.server_key, credential.iterations) == (
        salt,
        stored_key,
        server_key,
        iterations,
    )


def test_credential_from_salted_password_is_what_alter_stores() -> None:
    """AlterUserScramCredentials carries the salted password a client derived; the credential made from
    it equals the one made from the password."""
    m = MECHANISMS[SCRAM_SHA_512]
    salted = m.salted_password("pw", b"salt", 4096)
    assert ScramCredential.from_salted_password(
        SCRAM_SHA_512, b"salt", salted, 4096
    ) == ScramCredential.from_password(SCRAM_SHA_512, "pw", 4096, b"salt")


def test_verify_password() -> None:
    credential = ScramCredential.from_password(SCRAM_SHA_512, "right", 4096)
    assert credential.verify_password(SCRAM_SHA_512, "right")
    assert not credential.verify_password(SCRAM_SHA_512, "wrong")


def test_salts_are_fresh_base36_text_as_kafkas() -> None:
    salts = {secure_random_salt() for _ in range(50)}
    assert len(salts) == 50
    assert all(s.isalnum() and s == s.lower() and 20 <= len(s) <= 26 for s in salts)


async def test_credential_cache_follows_a_users_whole_config() -> None:
    cache = CredentialCache()
    a256 = ScramCredential.from_password(SCRAM_SHA_256, "a", 4096)
    a512 = ScramCredential.from_password(SCRAM_SHA_512, "a", 4096)
    cache.update_user("alice", {SCRAM_SHA_256: a256.to_string(), SCRAM_SHA_512: a512.to_string()})
    lookup: ScramCredentialLookup = cache  # the cache is what the SASL server asks
    assert await lookup(SCRAM_SHA_256, "alice") == a256
    assert await cache.lookup(SCRAM_SHA_512, "alice") == a512
    # A mechanism absent from the new config is removed (Kafka's CredentialProvider.updateCredentials).
    cache.update_user("alice", {SCRAM_SHA_512: a512.to_string(), "consumer_byte_rate": "1024"})
    assert cache.get(SCRAM_SHA_256, "alice") is None and cache.get(SCRAM_SHA_512, "alice") == a512
    assert await lookup("PLAIN", "alice") is None and await lookup(SCRAM_SHA_512, "bob") is None
    cache.load({"bob": {SCRAM_SHA_256: a256.to_string()}})
    assert cache.users(SCRAM_SHA_512) == [] and cache.users(SCRAM_SHA_256) == ["bob"]
    cache.remove_user("bob")
    assert cache.get(SCRAM_SHA_256, "bob") is None


def test_cache_of_enabled_mechanisms_only() -> None:
    cache = CredentialCache([SCRAM_SHA_512, "PLAIN"])
    cache.update_user("u", {SCRAM_SHA_256: ScramCredential(b"s", b"k", b"k", 4096).to_string()})
    assert cache.get(SCRAM_SHA_256, "u") is None


@pytest.mark.parametrize(
    ("name", "node"),
    [
        ("alice", "alice"),
        ("a b", "a%20b"),  # Kafka's Sanitizer: a space is %20, not +
        ("a*b", "a%2Ab"),
        ("CN=x,O=y", "CN%3Dx%2CO%3Dy"),
        ("a.b-c_d~é", "a.b-c_d%7E%C3%A9"),  # java.net.URLEncoder encodes ~
    ],
)
def test_user_node_names_are_sanitized_as_kafkas(name: str, node: str) -> None:
    assert sanitize(name) == node
    assert desanitize(node) == name
    assert user_config_path(name) == f"/config/users/{node}"


async def test_user_config_written_in_kafkas_format_with_a_change_notification() -> None:
    zk = FakeZk()
    store = users(zk)
    credential = await store.set_scram_password("al ice", "secret", SCRAM_SHA_512, 8192)
    data, _version = zk.nodes["/config/users/al%20ice"]
    assert json.loads(data) == {"version": 1, "config": {SCRAM_SHA_512: credential.to_string()}}
    assert json.loads(zk.changes()[-1]) == {"version": 2, "entity_path": "users/al%20ice"}
    assert await store(SCRAM_SHA_512, "al ice") == credential  # the controller's on-demand lookup
    assert await store(SCRAM_SHA_256, "al ice") is None and await store(SCRAM_SHA_512, "bob") is None
    assert await store.users() == ["al ice"]
    assert await store.all_user_configs() == {"al ice": {SCRAM_SHA_512: credential.to_string()}}


async def test_deleting_the_last_credential_deletes_the_user_node() -> None:
    zk = FakeZk()
    store = users(zk)
    await store.set_scram_password("alice", "a", SCRAM_SHA_256)
    await store.set_scram_password("alice", "a", SCRAM_SHA_512)
    assert await store.delete_scram_credential("alice", SCRAM_SHA_256)
    assert set(await store.user_config("alice")) == {SCRAM_SHA_512}
    assert await store.delete_scram_credential("alice", SCRAM_SHA_512)
    assert "/config/users/alice" not in zk.nodes  # Kafka's tryCleanQuotaNodes
    assert not await store.delete_scram_credential("alice", SCRAM_SHA_512)
    assert len(zk.changes()) == 4


async def test_user_node_with_children_is_kept_empty() -> None:
    """A user with per-client quota nodes keeps its node (Kafka deletes only a childless one)."""
    zk = FakeZk()
    store = users(zk)
    await store.set_scram_password("alice", "a")
    await zk.create("/config/users/alice/clients/c1", b"{}", makepath=True)
    await store.delete_scram_credential("alice", SCRAM_SHA_512)
    assert json.loads(zk.nodes["/config/users/alice"][0]) == {"version": 1, "config": {}}


async def test_concurrent_writer_is_not_overwritten() -> None:
    """Another broker writing the same user between the read and the write: the change is made again
    on what it wrote (Kafka's last writer would win and lose the other's credential)."""
    zk = FakeZk()
    store = users(zk)
    await store.set_scram_password("alice", "a", SCRAM_SHA_256)
    other = ScramCredential.from_password(SCRAM_SHA_256, "b", 4096)

    def concurrent() -> None:
        zk.nodes["/config/users/alice"] = (
            json.dumps({"version": 1, "config": {SCRAM_SHA_256: other.to_string()}}).encode(),
            zk.nodes["/config/users/alice"][1] + 1,
        )

    zk.before_write = concurrent
    mine = await store.set_scram_password("alice", "c", SCRAM_SHA_512)
    assert await store.user_config("alice") == {
        SCRAM_SHA_256: other.to_string(),
        SCRAM_SHA_512: mine.to_string(),
    }


async def test_aborted_change_writes_nothing() -> None:
    zk = FakeZk()
    store = users(zk)

    def refuse(configs: dict[str, str]) -> dict[str, str]:
        raise LookupError("no")

    with pytest.raises(LookupError):
        await store.alter("alice", refuse)
    assert "/config/users/alice" not in zk.nodes and zk.changes() == []


async def test_config_change_listener_refreshes_the_cache() -> None:
    """A users/<user> notification makes the broker's cache read the user's configs again; quota-only
    entities (<default>, <user>/clients/<id>) leave it alone (Kafka's UserConfigHandler)."""
    zk = FakeZk()
    store = users(zk)
    listener = ConfigChangeListener(1, cast(Any, SimpleNamespace(zk=zk)), cast(Any, None), cast(Any, None))
    cache = listener.credentials = CredentialCache()
    credential = await store.set_scram_password("bob smith", "pw")
    await listener._apply_change("users", "bob%20smith")
    assert cache.get(SCRAM_SHA_512, "bob smith") == credential
    await listener._apply_change("users", "<default>")
    await listener._apply_change("users", "bob%20smith/clients/c1")
    assert cache.get(SCRAM_SHA_512, "bob smith") == credential
    await store.delete_scram_credential("bob smith", SCRAM_SHA_512)
    await listener._apply_change("users", "bob%20smith")
    assert cache.get(SCRAM_SHA_512, "bob smith") is None
