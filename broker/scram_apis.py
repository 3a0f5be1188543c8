"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), as a Kafka 3.9 broker in
ZooKeeper mode serves them (KafkaApis.handleDescribe/AlterUserScramCredentialsRequest and
ZkAdminManager.describe/alterUserScramCredentials, KIP-554).

Both need the Cluster resource: DESCRIBE for Describe, ALTER for Alter; otherwise
CLUSTER_AUTHORIZATION_FAILED (Describe: top level and for each user asked; Alter: for each user).

Describe answers each user's mechanisms and iteration counts, never the credential. No users (null or
empty) means every user with a SCRAM credential, sorted by name; users named: an empty name or a user
without a credential is RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE.

Alter takes deletions (user, mechanism) and upsertions (user, mechanism, iterations, salt, salted
password: the client derives the salted password, so the password itself never travels). Per user,
with Kafka's messages: an empty name is UNACCEPTABLE_CREDENTIAL "Username must not be empty", an
unknown mechanism UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism", iterations outside
4096..16384 UNACCEPTABLE_CREDENTIAL "Too few/many iterations", the same (user, mechanism) twice
DUPLICATE_RESOURCE, deleting a credential that does not exist RESOURCE_NOT_FOUND. A user with no error
has all its changes written at once (``/config/users/<user>`` and the change notification every
broker's CredentialCache follows); a user with an error has none.

Departures from Kafka: an upsertion with an empty salt or salted password is UNACCEPTABLE_CREDENTIAL
(Kafka's HMAC refuses an empty key with UNKNOWN_SERVER_ERROR and stores an empty salt); and any broker
serves Alter, where Kafka's ZooKeeper-mode brokers answer NOT_CONTROLLER unless they are the
controller: Samsa's controller is a separate process and every broker writes admin changes to
ZooKeeper itself (Metadata names the broker asked as the controller).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable

from broker.authorization import ALLOW_ALL, Authorization
from network.handler_pool import Parked
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    Message,
)
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType
from server_common.scram import MECHANISMS, MECHANISMS_BY_TYPE, ScramCredential, credentials_from_config
from zk.user_configs import UserConfigs

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]

USERNAME_MUST_NOT_BE_EMPTY = "Username must not be empty"
UNKNOWN_SCRAM_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW_ITERATIONS = "Too few iterations"
TOO_MANY_ITERATIONS = "Too many iterations"
DESCRIBE_MISSING_USER = "Attempt to describe a user credential that does not exist"
DELETE_MISSING_CREDENTIAL = "Attempt to delete a user credential that does not exist"
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
ERROR_PROCESSING_DESCRIBE = "Error processing describe user SCRAM credential configs request"

DescribeResult = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
AlterResult = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion


class _MissingCredential(Exception):
    """A deletion of a credential the user does not have (found while writing)."""


def _describe_result(user: str, config: dict[str, str]) -> DescribeResult | None:
    """The user's credential infos; None if the config holds no SCRAM credential."""
    present = [m for m in MECHANISMS.values() if m.name in config]
    if not present:
        return None
    parsed = credentials_from_config(config)
    if len(parsed) != len(present):
        log.error("user %s has an unreadable SCRAM credential in ZooKeeper", user)
        return DescribeResult(
            user=user, error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=ERROR_PROCESSING_DESCRIBE
        )
    infos = [
        DescribeUserScramCredentialsResponse.CredentialInfo(
            mechanism=m.type, iterations=parsed[m.name].iterations
        )
        for m in present
    ]
    return DescribeResult(user=user, error_code=ErrorCode.NONE, credential_infos=infos)


class ScramApis:
    def __init__(self, users: UserConfigs, authorization: Authorization = ALLOW_ALL) -> None:
        self.users = users
        self.authorization = authorization

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.handle_describe,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.handle_alter,
        }

    # -- DescribeUserScramCredentials -------------------------------------------------------------

    async def handle_describe(self, request: Request) -> Message:
        body: DescribeUserScramCredentialsRequest = request.body
        names = None if body.users is None else [u.name for u in body.users]
        if not self.authorization.authorize(
            request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            message = description(denied)
            # Kafka's getErrorResponse: the error at the top and once per user asked (user left empty).
            return DescribeUserScramCredentialsResponse(
                error_code=denied,
                error_message=message,
                results=[
                    DescribeResult(user="", error_code=denied, error_message=message) for _ in names or []
                ],
            )
        try:
            results = await self._describe(names)
        except Exception as e:  # ZooKeeper unreachable and the like
            log.error("%s from %s: %s", ERROR_PROCESSING_DESCRIBE, request.peer, e)
            return DescribeUserScramCredentialsResponse(
                error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=ERROR_PROCESSING_DESCRIBE
            )
        return DescribeUserScramCredentialsResponse(error_code=ErrorCode.NONE, results=results)

    async def _describe(self, names: list[str] | None) -> list[DescribeResult]:
        if not names:  # every user with a SCRAM credential, by name
            found = []
            for user, config in sorted((await self.users.all_user_configs()).items()):
                result = _describe_result(user, config)
                if result is not None:
                    found.append(result)
            return found
        by_user: dict[str, DescribeResult] = {}
        counts = Counter(names)
        for user in counts:
            if not user:
                by_user[user] = DescribeResult(
                    user=user,
                    error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message=USERNAME_MUST_NOT_BE_EMPTY,
                )
            elif counts[user] > 1:
                by_user[user] = DescribeResult(
                    user=user,
                    error_code=ErrorCode.DUPLICATE_RESOURCE,
                    error_message=f"Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {user}",
                )
            else:
                result = _describe_result(user, await self.users.user_config(user))
                by_user[user] = result or DescribeResult(
                    user=user,
                    error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message=f"{DESCRIBE_MISSING_USER}: {user}",
                )
        return [by_user[user] for user in counts]  # once per user, in the order asked

    # -- AlterUserScramCredentials ----------------------------------------------------------------

    async def handle_alter(self, request: Request) -> Message:
        body: AlterUserScramCredentialsRequest = request.body
        if not self.authorization.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            users = sorted({d.name for d in body.deletions} | {u.name for u in body.upsertions})
            return AlterUserScramCredentialsResponse(
                results=[
                    AlterResult(user=u, error_code=denied, error_message=description(denied)) for u in users
                ]
            )
        results = await self._alter(list(body.upsertions), list(body.deletions), request.peer)
        return AlterUserScramCredentialsResponse(results=results)

    async def _alter(
        self, upsertions: list[Upsertion], deletions: list[Deletion], peer: str
    ) -> list[AlterResult]:
        results: list[AlterResult] = []
        # Users refused outright (ZkAdminManager's illegal upsertions/deletions): one result each.
        illegal: dict[str, tuple[int, str]] = {}
        for d in deletions:
            if not d.name:
                illegal[d.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_MUST_NOT_BE_EMPTY)
            elif d.mechanism not in MECHANISMS_BY_TYPE:
                illegal[d.name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_SCRAM_MECHANISM)
        for u in upsertions:
            problem = self._upsertion_problem(u)
            if problem is not None:
                illegal[u.name] = problem
        for user, (code, message) in illegal.items():
            results.append(AlterResult(user=user, error_code=code, error_message=message))

        pairs = [(u.name, u.mechanism) for u in upsertions if u.name not in illegal]
        pairs += [(d.name, d.mechanism) for d in deletions if d.name not in illegal]
        duplicated = {user for (user, _), n in Counter(pairs).items() if n > 1}
        for user in sorted(duplicated):
            results.append(
                AlterResult(user=user, error_code=ErrorCode.DUPLICATE_RESOURCE, error_message=ALTERED_TWICE)
            )

        for user in dict.fromkeys(user for user, _ in pairs if user not in duplicated):
            mine_deleted = [MECHANISMS_BY_TYPE[d.mechanism].name for d in deletions if d.name == user]
            mine_upserted = [u for u in upsertions if u.name == user]
            results.append(await self._alter_user(user, mine_deleted, mine_upserted, peer))
        return results

    @staticmethod
    def _upsertion_problem(u: Upsertion) -> tuple[int, str] | None:
        if not u.name:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_MUST_NOT_BE_EMPTY
        m = MECHANISMS_BY_TYPE.get(u.mechanism)
        if m is None:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_SCRAM_MECHANISM
        if u.iterations < m.min_iterations:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_FEW_ITERATIONS
        if u.iterations > m.max_iterations:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_MANY_ITERATIONS
        if not u.salt or not u.salted_password:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
        return None

    async def _alter_user(
        self, user: str, deleted: list[str], upserted: list[Upsertion], peer: str
    ) -> AlterResult:
        new_values = {
            MECHANISMS_BY_TYPE[u.mechanism].name: ScramCredential.from_salted_password(
                MECHANISMS_BY_TYPE[u.mechanism].name, u.salt, u.salted_password, u.iterations
            ).to_string()
            for u in upserted
        }

        def change(configs: dict[str, str]) -> dict[str, str]:
            if any(name not in configs for name in deleted):
                raise _MissingCredential
            for name in deleted:
                del configs[name]
            configs.update(new_values)
            return configs

        try:
            await self.users.alter(user, change)
        except _MissingCredential:
            return AlterResult(
                user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND, error_message=DELETE_MISSING_CREDENTIAL
            )
        except Exception as e:
            log.error("altering the SCRAM credentials of user %s (request from %s) failed: %s", user, peer, e)
            return AlterResult(
                user=user,
                error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                error_message=description(ErrorCode.UNKNOWN_SERVER_ERROR),
            )
        log.info(
            "SCRAM credentials of user %s altered (request from %s): %s",
            user,
            peer,
            ", ".join([f"{n} deleted" for n in deleted] + [f"{n} set" for n in new_values]),
        )
        return AlterResult(user=user, error_code=ErrorCode.NONE)
