"""The SASL mechanisms on their own: PLAIN as Kafka's PlainSaslServer, SCRAM-SHA-256/512 against RFC
7677's test vector and against scramp (an independent implementation) in both directions, and every
way a SCRAM exchange must fail (bad proof, bad nonce, iterations below 4096, unknown user, Kafka's
tokenauth extension) with Kafka's messages; and the JAAS configuration parser."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable

import pytest
import scramp

from network.jaas import JaasError, option, parse_jaas_config, parse_single_entry
from network.sasl_mechanisms import (
    PlainClient,
    PlainServer,
    SaslFailure,
    ScramClient,
    ScramServer,
    scram_saslname,
    scram_username,
)
from server_common.scram import ScramCredential

# RFC 7677 section 3: SCRAM-SHA-256 for user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def run(coro: Awaitable[object]) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def lookup_of(credentials: dict[tuple[str, str], ScramCredential]):  # type: ignore[no-untyped-def]
    async def lookup(mechanism: str, username: str) -> ScramCredential | None:
        return credentials.get((mechanism, username))

    return lookup


def rfc_server() -> ScramServer:
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)
    return ScramServer(
        "SCRAM-SHA-256",
        lookup_of({("SCRAM-SHA-256", "user"): credential}),
        server_nonce=RFC_SERVER_NONCE,
    )


def test_scram_sha_256_server_answers_rfc_7677s_test_vector() -> None:
    server = rfc_server()
    assert run(server.evaluate_response(RFC_CLIENT_FIRST)) == RFC_SERVER_FIRST
    assert not server.complete
    assert run(server.evaluate_response(RFC_CLIENT_FINAL)) == RFC_SERVER_FINAL
    assert server.complete and server.authorization_id == "user"


def test_scram_sha_256_client_sends_rfc_7677s_test_vector() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", client_nonce=RFC_CLIENT_NONCE)
    assert client.initial_response() == RFC_CLIENT_FIRST
    assert client.evaluate_challenge(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert client.evaluate_challenge(RFC_SERVER_FINAL) is None
    assert client.complete


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_server_and_client_agree_with_scramp_both_ways(mechanism: str) -> None:
    credential = ScramCredential.from_password(mechanism, "a,=secret", 8192)
    # scramp's client against our server.
    server = ScramServer(mechanism, lookup_of({(mechanism, "al,i=ce"): credential}))
    theirs = scramp.ScramClient([mechanism], "al,i=ce", "a,=secret")
    server_first = run(server.evaluate_response(theirs.get_client_first().encode()))
    theirs.set_server_first(server_first.decode())  # type: ignore[union-attr]
    server_final = run(server.evaluate_response(theirs.get_client_final().encode()))
    theirs.set_server_final(server_final.decode())  # type: ignore[union-attr]
    assert server.complete and server.authorization_id == "al,i=ce"
    # Our client against scramp's server.
    scramp_server = scramp.ScramMechanism(mechanism).make_server(
        lambda _user: (credential.salt, credential.stored_key, credential.server_key, credential.iterations)
    )
    ours = ScramClient(mechanism, "al,i=ce", "a,=secret")
    scramp_server.set_client_first(ours.initial_response().decode())
    client_final = ours.evaluate_challenge(scramp_server.get_server_first().encode())
    assert client_final is not None
    scramp_server.set_client_final(client_final.decode())
    assert ours.evaluate_challenge(scramp_server.get_server_final().encode()) is None
    assert ours.complete


def _failure(server: ScramServer, *tokens: bytes) -> SaslFailure:
    with pytest.raises(SaslFailure) as failed:
        for token in tokens:
            run(server.evaluate_response(token))
    return failed.value


def test_a_wrong_scram_proof_fails_with_kafkas_generic_message_and_no_secret() -> None:
    bad = RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=AAAA")
    failure = _failure(rfc_server(), RFC_CLIENT_FIRST, bad)
    assert failure.client_message is None  # the client gets the generic message
    assert "Invalid client credentials" in failure.reason and "dHzb" not in failure.reason


def test_a_wrong_scram_password_fails() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "not-pencil")
    server = rfc_server()
    server_first = run(server.evaluate_response(client.initial_response()))
    final = client.evaluate_challenge(server_first)  # type: ignore[arg-type]
    assert final is not None
    assert "Invalid client credentials" in _failure(server, final).reason
    assert not server.complete


def test_a_scram_final_message_with_another_nonce_fails() -> None:
    bad = RFC_CLIENT_FINAL.replace(b"$k0,", b"$k1,")
    assert "Invalid client nonce" in _failure(rfc_server(), RFC_CLIENT_FIRST, bad).reason


def test_a_scram_credential_below_4096_iterations_is_refused() -> None:
    credential = ScramCredential.from_password("SCRAM-SHA-512", "pw", 1024)
    server = ScramServer("SCRAM-SHA-512", lookup_of({("SCRAM-SHA-512", "bob"): credential}))
    failure = _failure(server, b"n,,n=bob,r=abc")
    assert failure.reason == "Iterations 1024 is less than the minimum 4096 for SCRAM-SHA-512"
    assert failure.client_message is None


def test_a_scram_client_refuses_a_server_asking_for_fewer_than_4096_iterations() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", client_nonce=RFC_CLIENT_NONCE)
    client.initial_response()
    with pytest.raises(SaslFailure, match="less than the minimum 4096"):
        client.evaluate_challenge(RFC_SERVER_FIRST.replace(b"i=4096", b"i=4095"))


def test_a_scram_client_refuses_a_wrong_server_signature() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", client_nonce=RFC_CLIENT_NONCE)
    client.initial_response()
    client.evaluate_challenge(RFC_SERVER_FIRST)
    with pytest.raises(SaslFailure, match="Invalid server signature"):
        client.evaluate_challenge(b"v=" + base64.b64encode(b"x" * 32))


def test_an_unknown_scram_user_fails_at_the_first_message() -> None:
    failure = _failure(rfc_server(), b"n,,n=nobody,r=abc")
    assert failure.client_message is None and "Invalid user credentials" in failure.reason


def test_scram_without_a_credential_store_fails_every_user() -> None:
    server = ScramServer("SCRAM-SHA-256", None)
    assert _failure(server, RFC_CLIENT_FIRST).client_message is None


def test_kafkas_tokenauth_extension_is_refused_and_others_are_ignored() -> None:
    failure = _failure(rfc_server(), RFC_CLIENT_FIRST + b",tokenauth=true")
    assert failure.reason.startswith("Token Authentication failed")
    # An extension Kafka does not know is ignored: the exchange goes on (the proof covers it).
    server = rfc_server()
    assert run(server.evaluate_response(RFC_CLIENT_FIRST + b",foo=bar")) == RFC_SERVER_FIRST


def test_a_scram_authorization_id_other_than_the_user_is_refused_with_kafkas_message() -> None:
    failure = _failure(rfc_server(), b"n,a=admin,n=user,r=abc")
    assert failure.client_message == (
        "Authentication failed: Client requested an authorization id that is different from username"
    )
    server = rfc_server()
    run(server.evaluate_response(b"n,a=user,n=user,r=abc"))  # the same name is fine


@pytest.mark.parametrize(
    "token",
    [b"", b"y,,n=user,r=abc", b"n,,r=abc", b"n,,n=user", b"n,,n=us=er,r=abc", "n,,n=\u00e9,r=a".encode()],
)
def test_malformed_scram_client_first_messages_fail(token: bytes) -> None:
    assert _failure(rfc_server(), token).client_message is None


def test_a_scram_exchange_cannot_be_continued_after_it_failed_or_completed() -> None:
    server = rfc_server()
    _failure(server, b"garbage")
    _failure(server, RFC_CLIENT_FIRST)
    done = rfc_server()
    run(done.evaluate_response(RFC_CLIENT_FIRST))
    run(done.evaluate_response(RFC_CLIENT_FINAL))
    _failure(done, RFC_CLIENT_FINAL)


def test_scram_names_escape_comma_and_equals_as_kafka() -> None:
    assert scram_saslname("a,b=c") == "a=2Cb=3Dc"
    assert scram_username("a=2Cb=3Dc") == "a,b=c"


# -- PLAIN ---------------------------------------------------------------------------------------


USERS = {"alice": "alice-secret", "admin": "admin-secret"}


def test_plain_authenticates_a_user_of_the_jaas_config() -> None:
    server = PlainServer(USERS)
    assert run(server.evaluate_response(PlainClient("alice", "alice-secret").initial_response())) == b""
    assert server.complete and server.authorization_id == "alice"
    server = PlainServer(USERS)
    run(server.evaluate_response(b"alice\x00alice\x00alice-secret"))  # authzid = username is fine
    assert server.authorization_id == "alice"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\x00alice\x00xyzzy", "Authentication failed: Invalid username or password"),
        (b"\x00mallory\x00alice-secret", "Authentication failed: Invalid username or password"),
        (b"\x00\x00alice-secret", "Authentication failed: username not specified"),
        (b"\x00alice\x00", "Authentication failed: password not specified"),
        (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
        (b"a\x00b\x00c\x00d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (
            b"admin\x00alice\x00alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username",
        ),
    ],
)
def test_plain_failures_carry_kafkas_messages(token: bytes, message: str) -> None:
    server = PlainServer(USERS)
    with pytest.raises(SaslFailure) as failed:
        run(server.evaluate_response(token))
    assert failed.value.client_message == message
    assert "secret" not in failed.value.reason and "xyzzy" not in failed.value.reason
    assert not server.complete


# -- JAAS ----------------------------------------------------------------------------------------


def test_jaas_config_is_read_as_kafkas_jaas_config() -> None:
    entries = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        "  username=\"admin\" password='adm\\\"in' // the broker's own login\n"
        '  user_admin="admin-secret" /* users */ user_alice=alice-secret;'
    )
    (entry,) = entries
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.control_flag == "required"
    assert entry.options == {
        "username": "admin",
        "password": 'adm"in',
        "user_admin": "admin-secret",
        "user_alice": "alice-secret",
    }
    assert option(entries, "user_alice", entry.login_module) == "alice-secret"
    assert option(entries, "user_alice", "other.Module") is None
    two = parse_jaas_config('a.B required; c.D OPTIONAL x="1";')
    assert [e.control_flag for e in two] == ["required", "optional"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Login module not specified in JAAS config"),
        ("a.B", "Login module control flag not specified in JAAS config"),
        ("a.B always;", "Invalid login module control flag 'always' in JAAS config"),
        ("a.B required x=;", "Value not specified for key 'x' in JAAS config"),
        ("a.B required x=1;", "Value not specified for key 'x' in JAAS config"),
        ('a.B required x="1"', "JAAS config entry not terminated by semi-colon"),
        ("a.B required; c.D required;", "JAAS config property contains 2 login modules, should be 1 module"),
    ],
)
def test_bad_jaas_configs_fail_with_kafkas_messages(text: str, message: str) -> None:
    with pytest.raises(JaasError) as failed:
        parse_single_entry(text)
    assert str(failed.value) == message


def test_a_final_nonce_that_ends_with_the_combined_nonce_is_accepted_as_kafka_accepts_it() -> None:
    """librdkafka before 2.2 (Debian's kcat) sends its nonce followed by the combined nonce in its
    client-final message and signs that; Kafka's server checks only that the nonce ends with the
    combined one."""
    from server_common.scram import mechanism

    scram = mechanism("SCRAM-SHA-256")
    server = rfc_server()
    run(server.evaluate_response(RFC_CLIENT_FIRST))
    combined = RFC_CLIENT_NONCE + RFC_SERVER_NONCE
    without_proof = f"c=biws,r={RFC_CLIENT_NONCE}{combined}"
    salted = scram.salted_password("pencil", RFC_SALT, 4096)
    client_key = scram.hmac(salted, b"Client Key")
    auth = f"n=user,r={RFC_CLIENT_NONCE},{RFC_SERVER_FIRST.decode()},{without_proof}".encode()
    signature = scram.hmac(scram.hash(client_key), auth)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    assert run(server.evaluate_response(final)).startswith(b"v=")
    assert server.complete
