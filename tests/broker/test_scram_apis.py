"""DescribeUserScramCredentials and AlterUserScramCredentials against the handlers, with Kafka's results
(ZkAdminManager.describe/alterUserScramCredentials) for each kind of bad input, and the Cluster
DESCRIBE / ALTER checks (CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

import pytest

from broker.authorization import Authorization
from broker.scram_apis import ScramApis
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from server_common.acls import CLUSTER_NAME, AclOperation, Action, ResourceType
from server_common.principal import KafkaPrincipal
from server_common.scram import MECHANISMS, SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential
from tests.broker.fake_user_zk import FakeZk
from zk.user_configs import UserConfigs

Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
SHA256, SHA512 = MECHANISMS[SCRAM_SHA_256].type, MECHANISMS[SCRAM_SHA_512].type


def request(body: object) -> Any:
    return SimpleNamespace(
        body=body, peer="10.0.0.9:5000", principal=KafkaPrincipal("User", "bob"), client_ip="10.0.0.9"
    )


def upsert(name: str, mechanism: int = SHA512, iterations: int = 8192, password: str = "pw") -> Upsertion:
    salt = b"a-salt-of-some-length"
    salted = (
        MECHANISMS[SCRAM_SHA_512 if mechanism == SHA512 else SCRAM_SHA_256].salted_password(
            password, salt, iterations
        )
        if mechanism in (SHA256, SHA512)
        else b"x"
    )
    return Upsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted)


@pytest.fixture
def zk() -> FakeZk:
    return FakeZk()


@pytest.fixture
def apis(zk: FakeZk) -> ScramApis:
    return ScramApis(UserConfigs(cast(Any, zk)))


async def alter(
    apis: ScramApis,
    upsertions: list[Upsertion] = (),
    deletions: list[Deletion] = (),  # type: ignore[assignment]
) -> dict[str, tuple[int, str | None]]:
    response: AlterUserScramCredentialsResponse = await apis.handle_alter(
        request(AlterUserScramCredentialsRequest(upsertions=list(upsertions), deletions=list(deletions)))
    )
    results = {r.user: (r.error_code, r.error_message) for r in response.results}
    assert len(results) == len(response.results)  # one result per user
    return results


async def describe(apis: ScramApis, users: list[str] | None) -> DescribeUserScramCredentialsResponse:
    body = DescribeUserScramCredentialsRequest(
        users=None if users is None else [DescribeUserScramCredentialsRequest.UserName(name=u) for u in users]
    )
    return await apis.handle_describe(request(body))


def test_handlers_registered_for_both_api_keys(apis: ScramApis) -> None:
    assert set(apis.handlers()) == {
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    }


async def test_upsertion_stores_kafkas_credential_usable_with_the_password(
    apis: ScramApis, zk: FakeZk
) -> None:
    assert await alter(apis, [upsert("alice", SHA512, 8192, "alice-secret")]) == {
        "alice": (ErrorCode.NONE, "")
    }
    config = json.loads(zk.nodes["/config/users/alice"][0])["config"]
    credential = ScramCredential.from_string(config[SCRAM_SHA_512])
    assert credential.iterations == 8192 and credential.salt == b"a-salt-of-some-length"
    assert credential.verify_password(SCRAM_SHA_512, "alice-secret")
    assert json.loads(zk.changes()[-1]) == {"version": 2, "entity_path": "users/alice"}


async def test_describe_lists_mechanisms_and_iterations_never_keys(apis: ScramApis) -> None:
    await alter(apis, [upsert("bob", SHA256, 4096), upsert("bob", SHA512, 16384), upsert("alice")])
    response = await describe(apis, None)
    assert response.error_code == ErrorCode.NONE
    got = {r.user: [(c.mechanism, c.iterations) for c in r.credential_infos] for r in response.results}
    assert got == {"alice": [(SHA512, 8192)], "bob": [(SHA256, 4096), (SHA512, 16384)]}
    assert [r.user for r in response.results] == ["alice", "bob"]  # sorted, as Kafka
    assert [r.user for r in (await describe(apis, [])).results] == ["alice", "bob"]  # empty list: all


async def test_describe_all_skips_users_without_scram(apis: ScramApis, zk: FakeZk) -> None:
    await zk.create(
        "/config/users/quota-only", b'{"version":1,"config":{"producer_byte_rate":"1024"}}', makepath=True
    )
    await alter(apis, [upsert("alice")])
    assert [r.user for r in (await describe(apis, None)).results] == ["alice"]


async def test_describe_named_users_errors_as_kafka(apis: ScramApis, zk: FakeZk) -> None:
    await alter(apis, [upsert("alice")])
    await zk.create(
        "/config/users/quota-only", b'{"version":1,"config":{"producer_byte_rate":"1024"}}', makepath=True
    )
    response = await describe(apis, ["nobody", "alice", "", "twice", "twice", "quota-only"])
    got = {r.user: (r.error_code, r.error_message) for r in response.results}
    assert [r.user for r in response.results] == ["nobody", "alice", "", "twice", "quota-only"]
    assert got == {
        "nobody": (
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: nobody",
        ),
        "alice": (ErrorCode.NONE, ""),
        "": (ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty"),
        "twice": (
            ErrorCode.DUPLICATE_RESOURCE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: twice",
        ),
        "quota-only": (
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: quota-only",
        ),
    }


async def test_describe_reports_unreadable_credential_for_that_user(apis: ScramApis, zk: FakeZk) -> None:
    await zk.create(
        "/config/users/broken", b'{"version":1,"config":{"SCRAM-SHA-256":"garbage"}}', makepath=True
    )
    await alter(apis, [upsert("alice")])
    got = {r.user: r.error_code for r in (await describe(apis, None)).results}
    assert got == {"alice": ErrorCode.NONE, "broken": ErrorCode.UNKNOWN_SERVER_ERROR}


@pytest.mark.parametrize(
    ("upsertion", "code", "message"),
    [
        (upsert(""), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        (upsert("u", mechanism=0), ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        (upsert("u", mechanism=3), ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        (upsert("u", iterations=4095), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        (upsert("u", iterations=16385), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        (
            Upsertion(name="u", mechanism=SHA512, iterations=4096, salt=b"", salted_password=b"x"),
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "Salt and salted password must not be empty",
        ),
    ],
)
async def test_bad_upsertion_is_refused_and_writes_nothing(
    apis: ScramApis, zk: FakeZk, upsertion: Upsertion, code: int, message: str
) -> None:
    assert await alter(apis, [upsertion, upsert("fine")]) == {
        upsertion.name: (code, message),
        "fine": (0, ""),
    }
    assert await UserConfigs(cast(Any, zk)).users() == ["fine"]


async def test_bad_deletions_are_refused(apis: ScramApis) -> None:
    results = await alter(
        apis,
        deletions=[
            Deletion(name="", mechanism=SHA512),
            Deletion(name="u", mechanism=9),
            Deletion(name="missing", mechanism=SHA512),
        ],
    )
    assert results == {
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "u": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "missing": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
    }


async def test_same_user_and_mechanism_twice_is_duplicate_resource(apis: ScramApis, zk: FakeZk) -> None:
    await alter(apis, [upsert("bob", SHA256)])
    results = await alter(apis, [upsert("alice"), upsert("alice")], [Deletion(name="bob", mechanism=SHA256)])
    assert results == {
        "alice": (
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        ),
        "bob": (ErrorCode.NONE, ""),
    }
    assert await UserConfigs(cast(Any, zk)).users() == []  # bob's last credential gone: node deleted


async def test_one_user_can_upsert_one_mechanism_and_delete_another(apis: ScramApis, zk: FakeZk) -> None:
    await alter(apis, [upsert("carol", SHA256)])
    assert await alter(apis, [upsert("carol", SHA512)], [Deletion(name="carol", mechanism=SHA256)]) == {
        "carol": (ErrorCode.NONE, "")
    }
    assert set(await UserConfigs(cast(Any, zk)).user_config("carol")) == {SCRAM_SHA_512}


async def test_a_failed_deletion_fails_the_users_whole_change(apis: ScramApis, zk: FakeZk) -> None:
    results = await alter(apis, [upsert("dave", SHA512)], [Deletion(name="dave", mechanism=SHA256)])
    assert results == {
        "dave": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    }
    assert await UserConfigs(cast(Any, zk)).users() == []


class DenyAll:
    def __init__(self) -> None:
        self.asked: list[Action] = []

    def authorize(self, principal: KafkaPrincipal, host: str, actions: list[Action]) -> list[bool]:
        self.asked += actions
        return [False] * len(actions)

    def authorize_by_resource_type(self, *args: object) -> bool:
        return False


async def test_without_cluster_alter_every_user_is_cluster_authorization_failed(zk: FakeZk) -> None:
    authorizer = DenyAll()
    apis = ScramApis(UserConfigs(cast(Any, zk)), Authorization(authorizer))
    results = await alter(apis, [upsert("b"), upsert("a")], [Deletion(name="a", mechanism=SHA256)])
    assert results == {
        "a": (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
        "b": (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    }
    assert [(a.operation, a.resource_type, a.name) for a in authorizer.asked] == [
        (AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    ]
    assert zk.changes() == []


async def test_without_cluster_describe_the_request_is_cluster_authorization_failed(zk: FakeZk) -> None:
    authorizer = DenyAll()
    apis = ScramApis(UserConfigs(cast(Any, zk)), Authorization(authorizer))
    response = await describe(apis, ["alice", "bob"])
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [r.error_code for r in response.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
    assert (await describe(apis, None)).results == []
    assert authorizer.asked[0].operation == AclOperation.DESCRIBE
