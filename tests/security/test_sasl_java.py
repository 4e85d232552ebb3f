"""odradek.security checked against Kafka's own Java client and classes (kafka-clients 3.9 via
the Java harness, tests/security/java/SaslOracle.java):

- the Java Admin client authenticates with PLAIN and SCRAM-SHA-256/512 against SaslConnection
  (tests/security/sasl_listener.py), and a wrong password or an unknown user reaches it as
  SaslAuthenticationException with Kafka's text (OAUTHBEARER's Java login module needs Jackson,
  which the harness' classpath lacks; librdkafka covers it in test_librdkafka_sasl.py);
- certificate subjects as X500Principal.getName() prints them (dn_from_certificate);
- ssl.principal.mapping.rules as SslPrincipalMapper maps them;
- sasl.jaas.config values as JaasContext parses them.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID, ObjectIdentifier

from compat_tests.java_harness import JavaPrograms
from odradek.security.jaas import JaasConfigError, parse_jaas_config
from odradek.security.principal import SslPrincipalMapper, dn_from_certificate
from tests.security.sasl_listener import Listener, sasl_listener

JAVA_SOURCES = Path(__file__).resolve().parent / "java"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    return JavaPrograms(tmp_path_factory.mktemp("sasl-oracle"), source_dir=JAVA_SOURCES)


def ask(oracle: JavaPrograms, mode: str, lines: list[str], *args: str) -> list[str]:
    rc, out, err = oracle.run("SaslOracle", mode, *args, input="\n".join(lines) + "\n")
    assert rc == 0, err
    return out.splitlines()


@pytest.fixture
def listener() -> Iterator[Listener]:
    with sasl_listener() as server:
        yield server


def test_java_client_authenticates(oracle: JavaPrograms, listener: Listener) -> None:
    cases = {
        "plain": ("PLAIN", f'{PLAIN_MODULE} required username="alice" password="alice-secret";'),
        "plain-bad": ("PLAIN", f'{PLAIN_MODULE} required username="alice" password="x";'),
        "scram256": (
            "SCRAM-SHA-256",
            f'{SCRAM_MODULE} required username="alice" password="alice-secret";',
        ),
        "scram512": (
            "SCRAM-SHA-512",
            f'{SCRAM_MODULE} required username="alice" password="alice-secret";',
        ),
        "scram-bad": ("SCRAM-SHA-512", f'{SCRAM_MODULE} required username="alice" password="x";'),
        "scram-nouser": ("SCRAM-SHA-256", f'{SCRAM_MODULE} required username="eve" password="x";'),
    }
    lines = [f"{cid}\t{mech}\t{jaas}" for cid, (mech, jaas) in cases.items()]
    out = ask(oracle, "clients", lines, f"127.0.0.1:{listener.port}")
    java = {line.split("\t")[0]: line.split("\t")[1:] for line in out}
    for cid in ("plain", "scram256", "scram512"):
        assert listener.outcome(cid) == ("authenticated", "User:alice"), (cid, java[cid])
    generic = (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism {}"
    )
    expected = {
        "plain-bad": "Authentication failed: Invalid username or password",
        "scram-bad": generic.format("SCRAM-SHA-512"),
        "scram-nouser": generic.format("SCRAM-SHA-256"),
    }
    for cid, message in expected.items():
        assert listener.outcome(cid) == ("failed", message)
        assert java[cid] == ["ERR", "SaslAuthenticationException", message]


def _certificate(tmp_path: Path, index: int, name: x509.Name) -> tuple[Path, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "issuer")]))
        .public_key(key.public_key())
        .serial_number(1000 + index)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    path = tmp_path / f"cert{index}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path, cert.public_bytes(serialization.Encoding.DER)


def _attr(oid: ObjectIdentifier, value: str) -> x509.NameAttribute:
    return x509.NameAttribute(oid, value)


SUBJECTS = [
    x509.Name(
        [
            _attr(NameOID.COUNTRY_NAME, "US"),
            _attr(NameOID.ORGANIZATION_NAME, "Org"),
            _attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "ServiceUsers"),
            _attr(NameOID.COMMON_NAME, "Tkac, Adam"),
            _attr(NameOID.EMAIL_ADDRESS, "duke@example.com"),
        ]
    ),
    x509.Name(
        [
            x509.RelativeDistinguishedName(
                [_attr(NameOID.COMMON_NAME, "multi"), _attr(NameOID.USER_ID, "a+b")]
            ),
            x509.RelativeDistinguishedName([_attr(NameOID.DOMAIN_COMPONENT, "example")]),
        ]
    ),
    x509.Name(
        [
            _attr(NameOID.COMMON_NAME, '  lead#=;<>"\\ trail  '),
            _attr(NameOID.ORGANIZATION_NAME, "#hash"),
            _attr(NameOID.LOCALITY_NAME, "José Ñandú 東京"),
            _attr(NameOID.STATE_OR_PROVINCE_NAME, "ST"),
            _attr(NameOID.STREET_ADDRESS, "1 Main St"),
        ]
    ),
    x509.Name(
        [
            _attr(NameOID.SERIAL_NUMBER, "1234"),
            _attr(NameOID.TITLE, "Dr"),
            _attr(NameOID.SURNAME, "Doe"),
            _attr(NameOID.GIVEN_NAME, "Jane"),
            _attr(NameOID.COMMON_NAME, "x"),
        ]
    ),
]


def test_certificate_dn_is_javas(oracle: JavaPrograms, tmp_path: Path) -> None:
    certs = [_certificate(tmp_path, i, name) for i, name in enumerate(SUBJECTS)]
    java = ask(oracle, "dn", [str(path) for path, _ in certs])
    assert [dn_from_certificate(der) for _, der in certs] == java


MAPPING_CASES = [
    ("DEFAULT", "CN=Duke,OU=ServiceUsers,O=Org,C=US"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT", "CN=Duke,OU=ServiceUsers,O=Org,C=US"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT", "CN=Duke,OU=Other,O=Org,C=US"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$2-$1-$3/U", "CN=a,OU=b,O=c"),
    ("RULE:^CN=(.*?),OU=(.*?)$/$1/", "OU=x,CN=y"),
    (r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT", r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz"),
    (r"RULE:^CN=(\w+)$/$1-$2-$12-\$1/", "CN=abc"),
    ("RULE:(.*)/[$1]/", "CN=abc"),
    ("RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U", "cN=duke,OU=JavaSoft,O=Sun Microsystems"),
    ("RULE:^CN=([^,]+).*$/$1@EXAMPLE.COM/", "CN=svc,O=x"),
    ("RULE:^OU=(.*)$/$1/", "CN=x"),
    ("RULE:^CN=(.*)$/$1/L/U", "CN=x"),
    ("", "CN=x"),
]


def test_principal_mapping_is_kafkas(oracle: JavaPrograms) -> None:
    java = ask(oracle, "map", [f"{rules}\t{dn}" for rules, dn in MAPPING_CASES])
    ours = []
    for rules, dn in MAPPING_CASES:
        try:
            ours.append(SslPrincipalMapper(rules).name(dn))
        except ValueError as e:
            ours.append("ERR " + ("NoMatchingRule" if "No rules" in str(e) else "x"))
    java = [
        line if not line.startswith("ERR ") or "NoMatchingRule" in line else "ERR x"
        for line in java
    ]
    assert ours == java


JAAS_CASES = [
    f'{PLAIN_MODULE} required username="admin" password="admin-secret" user_admin="a" '
    'user_alice="alice-secret";',
    'test.Module REQUISITE a="x y" b=\'single\' c="esc\\"aped\\\\" d="tab\\tnl\\n" e=word_1.2-3$;',
    "// comment\ntest.Module optional /* block */ key=value;",
    "test.Module sufficient key=3;",
    "test.Module required key;",
    "test.Module required key=value",
    "test.Module bogus key=value;",
    'test.Module required "quoted key"=v octal="\\101\\60";',
    "test.Module required a=b; other.Module required;",
    "com.sun.security.auth.module.JndiLoginModule required;",
    "   ",
]


def test_jaas_parsing_is_kafkas(oracle: JavaPrograms) -> None:
    encoded = [base64.b64encode(text.encode()).decode() for text in JAAS_CASES]
    java = ask(oracle, "jaas", encoded)
    assert len(java) == len(JAAS_CASES)
    for text, answer in zip(JAAS_CASES, java, strict=True):
        try:
            entries = parse_jaas_config(text)
        except JaasConfigError:
            assert answer.startswith("ERR"), (text, answer)
            continue
        if len(entries) != 1 or entries[0].login_module.endswith("JndiLoginModule"):
            assert answer.startswith("ERR"), (text, answer)  # a client allows one module only
            continue
        entry = entries[0]
        options = [
            f"{k}={base64.b64encode(v.encode()).decode()}" for k, v in sorted(entry.options.items())
        ]
        assert answer.split("\t") == [entry.login_module, entry.flag, *options], text
