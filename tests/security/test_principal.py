"""ssl.principal.mapping.rules (odradek.security.principal), with Kafka's SslPrincipalMapperTest
cases, and the RFC 2253 DN of a real certificate's subject as Java prints it."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from odradek.security.principal import (
    ANONYMOUS,
    NoMatchingRule,
    SslPrincipalMapper,
    dn_from_subject,
)


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
def test_valid_rules(rules: str) -> None:
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
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper(rules)


def test_kafkas_mapping_examples() -> None:
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
    assert (
        mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    )
    assert mapper.principal("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "User:duke"
    assert mapper.principal(None) == ANONYMOUS


def test_comma_with_whitespace() -> None:
    mapper = SslPrincipalMapper(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


@pytest.mark.parametrize(
    ("expected", "rules"),
    [
        ("", ""),
        ("DEFAULT", "DEFAULT"),
        ("RULE:/", "RULE://"),
        ("RULE:/.*", "RULE:/.*/"),
        ("RULE:/.*/L", "RULE:/.*/L"),
        ("RULE:/, DEFAULT", "RULE://,DEFAULT"),
        ("RULE:/, DEFAULT", "  RULE:// ,  DEFAULT  "),
        ("RULE:   /     , DEFAULT", "  RULE:   /     / ,  DEFAULT  "),
        ("RULE:  /     /U, DEFAULT", "  RULE:  /     /U   ,DEFAULT  "),
        (
            "RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT",
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
        ),
        ("", ",   , , ,      , , ,   "),
        ("RULE:/, DEFAULT", ",,RULE://,,,DEFAULT,,"),
        ("RULE: /   , DEFAULT", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("RULE:   /  /U, DEFAULT", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    ],
)
def test_rules_splitting(expected: str, rules: str) -> None:
    # Kafka's testRulesSplitting, through the rules' text.
    assert ", ".join(str(rule) for rule in SslPrincipalMapper(rules).rules) == expected


def test_no_matching_rule_and_back_references() -> None:
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x"):
        SslPrincipalMapper("RULE:^OU=(.*)$/$1/").name("CN=x")
    # $2 with one group stays literal (Kafka escapes it); $12 with one group is $1 then "2".
    mapper = SslPrincipalMapper(r"RULE:^CN=(\w+)$/$1-$2-$12-\$1/")
    assert mapper.name("CN=abc") == "abc-$2-abc2-$1"


def _cert_subject(tmp_path: Path, name: x509.Name) -> Any:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    path = tmp_path / "cert.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    # The same dict ssl.SSLSocket.getpeercert() returns for a verified peer.
    decoded = ssl._ssl._test_decode_cert(str(path))  # type: ignore[attr-defined]
    return decoded["subject"]


def test_dn_from_a_certificates_subject(tmp_path: Path) -> None:
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Org"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "ServiceUsers"),
            x509.NameAttribute(NameOID.COMMON_NAME, "Tkac, Adam"),
            x509.NameAttribute(NameOID.EMAIL_ADDRESS, "duke@example.com"),
        ]
    )
    dn = dn_from_subject(_cert_subject(tmp_path, name))
    # Java's X500Principal.getName(): last RDN first, the e-mail as OID=#<DER IA5String hex>.
    assert dn == (
        "1.2.840.113549.1.9.1=#1610" + b"duke@example.com".hex() + r",CN=Tkac\, Adam,"
        "OU=ServiceUsers,O=Org,C=US"
    )
    mapper = SslPrincipalMapper(r"RULE:^.*CN=((\\, *|\w)+),OU=ServiceUsers.*$/$1/L,DEFAULT")
    assert mapper.principal(dn) == r"User:tkac\, adam"
    assert SslPrincipalMapper().principal(dn) == "User:" + dn


def test_dn_escaping_and_multi_valued_rdn() -> None:
    subject = (
        (("countryName", "US"),),
        (("commonName", " lead#"), ("userId", "a+b")),
        (("organizationName", "#hash<>;"),),
    )
    assert dn_from_subject(subject) == r"O=\#hash\<\>\;,CN=\ lead\#+UID=a\+b,C=US"
