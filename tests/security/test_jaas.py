"""Kafka's JAAS config parsing (odradek.security.jaas), with cases from Kafka's JaasContextTest."""

from __future__ import annotations

import pytest

from odradek.security.jaas import (
    PLAIN_LOGIN_MODULE,
    JaasConfigError,
    JaasEntry,
    client_jaas_entry,
    login_credentials,
    parse_jaas_config,
    parse_jaas_file,
    plain_users,
    server_jaas_config_key,
    server_jaas_entry,
)

PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" '
    'user_alice="alice-secret";'
)


def test_plain_listener_config() -> None:
    [entry] = parse_jaas_config(PLAIN)
    assert entry.login_module == PLAIN_LOGIN_MODULE and entry.flag == "required"
    assert entry.options == {
        "username": "admin",
        "password": "admin-secret",
        "user_admin": "admin-secret",
        "user_alice": "alice-secret",
    }
    assert plain_users(entry) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert login_credentials(entry) == ("admin", "admin-secret")
    assert "admin-secret" not in repr(entry)


@pytest.mark.parametrize("flag", ["required", "REQUISITE", "Sufficient", "optional"])
def test_control_flags(flag: str) -> None:
    [entry] = parse_jaas_config(f"test.testControlFlag {flag} propName=propValue;")
    assert entry == JaasEntry("test.testControlFlag", flag.lower(), {"propName": "propValue"})


def test_quoting_escapes_comments_and_several_modules() -> None:
    text = r"""
        // a comment
        test.Module1 required propName="prop value" propName2="value1 = 1, value2 = 2"
            "prop name"=propValue single='it is' esc="a\"b\\c\n\101" /* block
            comment */ word=ab-c_d$e.f;
        test.Module2 optional;
    """
    first, second = parse_jaas_config(text)
    assert first.options == {
        "propName": "prop value",
        "propName2": "value1 = 1, value2 = 2",
        "prop name": "propValue",
        "single": "it is",
        "esc": 'a"b\\c\nA',
        "word": "ab-c_d$e.f",
    }
    assert second == JaasEntry("test.Module2", "optional", {})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Login module not specified"),
        ("  required option1=value1;", "Invalid login module control flag 'option1'"),
        ("test.loginModule option1=value1;", "Invalid login module control flag 'option1'"),
        ("loginModule required option1;", "Value not specified for key 'option1'"),
        ("test.testMissingSemicolon required option1=value1", "not terminated by semi-colon"),
        ("test.testNumericOptionWithoutQuotes required option1=3;", "Value not specified"),
        ("test.testInvalidControlFlag { option1=3;", "control flag is not available"),
        ("test.Module", "control flag not specified"),
    ],
)
def test_invalid_configs(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message):
        parse_jaas_config(text)


def test_numeric_value_with_quotes() -> None:
    [entry] = parse_jaas_config('test.testNumericOptionWithQuotes required option1="3";')
    assert entry.options == {"option1": "3"}


def test_server_lookup_by_listener_and_mechanism() -> None:
    key = server_jaas_config_key("SASL_SSL", "SCRAM-SHA-256")
    assert key == "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"
    config = {"listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN}
    found = server_jaas_entry(config.get, "SASL_PLAINTEXT", "PLAIN")
    assert found.entry is not None and found.warning is None
    assert plain_users(found.entry)["alice"] == "alice-secret"
    unprefixed = {"sasl.jaas.config": PLAIN}
    ignored = server_jaas_entry(unprefixed.get, "SASL_PLAINTEXT", "PLAIN")
    assert ignored.entry is None
    assert ignored.warning == (
        "Server config sasl.jaas.config should be prefixed with SASL mechanism name, "
        "ignoring config"
    )
    assert client_jaas_entry(unprefixed.get) == found.entry
    two = {key: "a.B required; c.D required;"}
    with pytest.raises(JaasConfigError, match="contains 2 login modules, should be 1 module"):
        server_jaas_entry(two.get, "SASL_SSL", "SCRAM-SHA-256")
    jndi = {"sasl.jaas.config": "com.sun.security.auth.module.JndiLoginModule required;"}
    with pytest.raises(JaasConfigError, match="is not allowed"):
        client_jaas_entry(jndi.get)


def test_users_only_from_the_plain_login_module() -> None:
    scram = parse_jaas_config(
        'org.apache.kafka.common.security.scram.ScramLoginModule required user_x="y";'
    )
    assert plain_users(scram) == {}
    assert plain_users(None) == {} and login_credentials(scram[0]) is None


def test_jaas_file_sections() -> None:
    text = """
    KafkaServer { test.LoginModuleDefault required; };
    plaintext.KafkaServer {
        org.apache.kafka.common.security.plain.PlainLoginModule requisite user_bob="b{}";
    };
    """
    sections = parse_jaas_file(text)
    assert set(sections) == {"KafkaServer", "plaintext.KafkaServer"}
    assert sections["KafkaServer"] == [JaasEntry("test.LoginModuleDefault", "required", {})]
    assert plain_users(sections["plaintext.KafkaServer"]) == {"bob": "b{}"}
    with pytest.raises(JaasConfigError):
        parse_jaas_file("KafkaServer { a.B required; ")
