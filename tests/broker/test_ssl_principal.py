"""The TLS principal: the certificate's DN as Java's X500Principal.getName() prints it, and Kafka's
SslPrincipalMapper rules (its own test cases, SslPrincipalMapperTest)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from network.ssl_principal import (
    NoMatchingRule,
    SslPrincipalMapper,
    java_rfc2253,
    principal_from_certificate,
)
from server_common.principal import ANONYMOUS, KafkaPrincipal
from tools.certificates import create_ca, issue_certificate


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_valid_mapping_rules_parse_as_kafka_parses_them(rules: str) -> None:
    SslPrincipalMapper(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_invalid_mapping_rules_are_refused_as_kafka_refuses_them(rules: str) -> None:
    with pytest.raises(ValueError):
        SslPrincipalMapper(rules)


def test_mapping_rules_map_as_kafka_maps() -> None:
    mapper = SslPrincipalMapper(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("", "[]"),
        ("DEFAULT", "[DEFAULT]"),
        ("RULE://", "[RULE:/]"),
        ("RULE:/.*/", "[RULE:/.*]"),
        ("RULE:/.*/L", "[RULE:/.*/L]"),
        ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
        ("  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"),
        (",   , , ,      , , ,   ", "[]"),
        (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
        ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]"),
    ],
)
def test_mapping_rules_split_as_kafka_splits_them(rules: str, expected: str) -> None:
    assert repr(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_a_comma_escaped_in_a_dn_stays_in_the_name() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_no_rule_matching_fails() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/").name("CN=x,OU=Other")


def test_a_back_reference_beyond_the_groups_is_literal() -> None:
    assert SslPrincipalMapper("RULE:^CN=(.*?),O=(.*)$/$1-$3/").name("CN=a,O=b") == "a-$3"


def _name(*attributes: tuple[x509.ObjectIdentifier, str]) -> x509.Name:
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in attributes])


def test_the_dn_reads_as_java_prints_it_last_rdn_first() -> None:
    name = _name(
        (NameOID.COUNTRY_NAME, "US"),
        (NameOID.ORGANIZATION_NAME, "Sun Microsystems"),
        (NameOID.ORGANIZATIONAL_UNIT_NAME, "JavaSoft"),
        (NameOID.COMMON_NAME, "Duke"),
    )
    assert java_rfc2253(name) == "CN=Duke,OU=JavaSoft,O=Sun Microsystems,C=US"


def test_the_dn_escapes_as_java_escapes() -> None:
    name = _name((NameOID.COMMON_NAME, "Tkac, Adam"), (NameOID.ORGANIZATION_NAME, " a=b#c+d "))
    assert java_rfc2253(name) == "O=\\ a\\=b\\#c\\+d\\ ,CN=Tkac\\, Adam"


def test_attributes_without_an_rfc2253_keyword_are_an_oid_and_hex_der() -> None:
    name = _name((NameOID.EMAIL_ADDRESS, "a@b.c"), (NameOID.COMMON_NAME, "alice"))
    # IA5String (0x16) of 5 bytes
    assert java_rfc2253(name) == "CN=alice,1.2.840.113549.1.9.1=#16056140622e63"


def test_a_multi_valued_rdn_joins_with_plus() -> None:
    name = x509.Name(
        [
            x509.RelativeDistinguishedName(
                [
                    x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
                    x509.NameAttribute(NameOID.USER_ID, "a1"),
                ]
            )
        ]
    )
    assert java_rfc2253(name) in ("CN=alice+UID=a1", "UID=a1+CN=alice")


def test_a_certificate_gives_user_and_its_mapped_dn(tmp_path: Path) -> None:
    ca = create_ca(tmp_path)
    cert = issue_certificate(ca, tmp_path, "alice", client=True, subject="CN=alice,OU=eng,O=Acme")
    der = cert.certificate.public_bytes(serialization.Encoding.DER)
    assert principal_from_certificate(der, SslPrincipalMapper("DEFAULT")) == KafkaPrincipal(
        "User", "CN=alice,OU=eng,O=Acme"
    )
    mapper = SslPrincipalMapper("RULE:^CN=([^,]*),.*$/$1/U")
    assert str(principal_from_certificate(der, mapper)) == "User:ALICE"
    assert principal_from_certificate(None, mapper) == ANONYMOUS
