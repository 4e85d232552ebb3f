"""Security for test brokers: a throwaway CA, certificates, SASL users, and the client settings.

`Security("sasl_ssl", mechanism="SCRAM-SHA-256", users={"alice": "pw"}, directory=...)` is what
`odradek.testing.Broker(security=...)`, `Cluster(security=...)` and `odradek dev --security` use:

- protocols: "ssl" (TLS, no client certificate), "mtls" (TLS with `ssl.client.auth=required`;
  each user gets a client certificate CN=<user>,O=odradek-test and the principal User:<user>
  through `ssl.principal.mapping.rules`), "sasl_plaintext", "sasl_ssl".
- mechanisms (SASL): PLAIN (users in the listener's JAAS config, as Kafka reads them),
  SCRAM-SHA-256 / SCRAM-SHA-512 (credentials written to the metadata store, as
  AlterUserScramCredentials would), OAUTHBEARER (Kafka's unsecured JWS validator: any
  principal, no password; clients make unsigned tokens).
- inter-broker traffic goes over the same listener, protocol and mechanism; the brokers'
  principal (`broker_principal`: User:admin with SASL, a random password; User:CN=localhost,
  the server certificate, with mTLS) is in `super.users` for when an authorizer is on, and so
  is User:admin under mTLS. `client_config(user="admin")` gives a client that super user.
- with `plaintext_too=True` a PLAINTEXT listener serves beside the secure one, for admin in
  tests: its clients are User:ANONYMOUS, a super user (except with "ssl", where clients of the
  TLS listener are User:ANONYMOUS too).

Client settings for a user: `client_config` (librdkafka / confluent-kafka / kcat properties),
`kafka_python_config` (kafka-python keyword arguments), `aiokafka_config` (aiokafka keyword
arguments), `java_properties` (kafka-clients properties), `kcat_args`, and
`write_properties(path, ...)` for a properties file.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from odradek.security.oauthbearer import unsecured_token
from odradek.testing.certs import TlsMaterial

PROTOCOLS = {
    "ssl": "SSL",
    "mtls": "SSL",
    "sasl_plaintext": "SASL_PLAINTEXT",
    "sasl_ssl": "SASL_SSL",
}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
ORG = "odradek-test"
BROKER_USER = "admin"
DEFAULT_USERS = {"alice": "alice-secret"}

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Security:
    """The security set-up of a test broker or cluster, and the settings its clients need."""

    def __init__(
        self,
        protocol: str,
        mechanism: str | None = None,
        users: Mapping[str, str] | None = None,
        directory: str | None = None,
        plaintext_too: bool = False,
    ) -> None:
        kind = protocol.lower()
        if kind not in PROTOCOLS:
            raise ValueError(f"security must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
        self.kind = kind
        self.protocol = PROTOCOLS[kind]
        self.listener = self.protocol  # the secure listener's name (Kafka's default map)
        self.uses_tls = self.protocol in ("SSL", "SASL_SSL")
        self.uses_sasl = self.protocol.startswith("SASL_")
        if self.uses_sasl:
            mech = (mechanism or "PLAIN").upper()
            if mech not in MECHANISMS:
                raise ValueError(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mech!r}")
            self.mechanism: str | None = mech
        else:
            if mechanism is not None:
                raise ValueError(f"security={protocol!r} takes no SASL mechanism")
            self.mechanism = None
        self.users = dict(DEFAULT_USERS if users is None else users)
        if BROKER_USER in self.users:
            raise ValueError(f"user {BROKER_USER!r} is the brokers' own; pick another name")
        self.broker_password = secrets.token_hex(12)
        self.plaintext_too = plaintext_too
        self._own_dir = directory is None
        self.directory = directory or tempfile.mkdtemp(prefix="odradek-security-")
        self.tls: TlsMaterial | None = None
        self.client_certs: dict[str, Any] = {}
        if self.uses_tls:
            self.tls = TlsMaterial(os.path.join(self.directory, "tls"))
            if kind == "mtls":
                for user in [BROKER_USER, *self.users]:
                    self.client_certs[user] = self.tls.client(user, ORG)

    # -- the broker's side ----------------------------------------------------------------------

    @property
    def listener_names(self) -> list[str]:
        """The listeners served, the secure one first."""
        return [self.listener, "PLAINTEXT"] if self.plaintext_too else [self.listener]

    def listeners(self, host: str, ports: Mapping[str, int] | None = None) -> str:
        """The `listeners` value, each listener on its port in `ports` (0: a free one)."""
        ports = ports or {}
        return ",".join(f"{n}://{host}:{ports.get(n, 0)}" for n in self.listener_names)

    @property
    def broker_principal(self) -> str:
        """The principal brokers have towards each other (in super.users)."""
        if self.uses_sasl:
            return f"User:{BROKER_USER}"
        if self.kind == "mtls":
            return "User:CN=localhost"  # the server certificate's subject (no mapping rule)
        return "User:ANONYMOUS"  # TLS without client certificates: Kafka's anonymous principal

    def broker_config(self, extra_super_users: str | None = None) -> dict[str, str]:
        """Every broker key but `listeners`: TLS, SASL, inter-broker listener, super.users."""
        cfg: dict[str, str] = {"inter.broker.listener.name": self.listener}
        if self.tls is not None:
            cfg.update(self.tls.broker_config("required" if self.kind == "mtls" else "none"))
        if self.kind == "mtls":
            # client certificates CN=<user>,O=odradek-test are principals User:<user>; brokers
            # present their server certificate (CN=localhost) to each other
            prefix = f"listener.name.{self.listener.lower()}."
            cfg[prefix + "ssl.principal.mapping.rules"] = f"RULE:^O={ORG},CN=([^,]+)$/$1/,DEFAULT"
        if self.uses_sasl:
            assert self.mechanism is not None
            mech = self.mechanism
            cfg["sasl.enabled.mechanisms"] = mech
            cfg["sasl.mechanism.inter.broker.protocol"] = mech
            key = f"listener.name.{self.listener.lower()}.{mech.lower()}.sasl.jaas.config"
            cfg[key] = self._server_jaas()
        supers = [self.broker_principal] if self.broker_principal != "User:ANONYMOUS" else []
        if self.kind == "mtls":
            supers.append(f"User:{BROKER_USER}")
        if self.plaintext_too and self.kind != "ssl":
            # the PLAINTEXT listener is the tests' admin door: its clients (User:ANONYMOUS,
            # which no client of the secure listener can be) are super users
            supers.append("User:ANONYMOUS")
        if extra_super_users:
            supers += [s.strip() for s in extra_super_users.split(";") if s.strip()]
        if supers:
            cfg["super.users"] = ";".join(dict.fromkeys(supers))
        return cfg

    def _server_jaas(self) -> str:
        assert self.mechanism is not None
        module = _LOGIN_MODULES[self.mechanism]
        if self.mechanism == "OAUTHBEARER":
            return f"{module} required unsecuredLoginStringClaim_sub={_quote(BROKER_USER)};"
        opts = [f"username={_quote(BROKER_USER)}", f"password={_quote(self.broker_password)}"]
        if self.mechanism == "PLAIN":
            opts.append(f"user_{BROKER_USER}={_quote(self.broker_password)}")
            opts += [f"user_{u}={_quote(p)}" for u, p in self.users.items()]
        return f"{module} required {' '.join(opts)};"

    def scram_credentials(self) -> dict[str, dict[str, str]]:
        """user -> {mechanism: Kafka's credential string} for the broker user and every user
        (empty unless the mechanism is SCRAM)."""
        if self.mechanism is None or not self.mechanism.startswith("SCRAM-"):
            return {}
        from odradek.security.scram import (
            ScramMechanism,
            credential_to_string,
            generate_credential,
        )

        mech = ScramMechanism.from_name(self.mechanism)
        assert mech is not None
        out = {}
        for user, password in [(BROKER_USER, self.broker_password), *self.users.items()]:
            out[user] = {self.mechanism: credential_to_string(generate_credential(mech, password))}
        return out

    def install_scram(self, store: Any) -> None:
        """Write the SCRAM credentials into a metadata store, as AlterUserScramCredentials does
        (the store's `alter_scram_credentials` when it has one, else its credential map)."""
        creds = self.scram_credentials()
        if not creds:
            return
        alter = getattr(store, "alter_scram_credentials", None)
        if alter is not None:
            alter([(user, dict(c)) for user, c in creds.items()])
            return
        current = getattr(store, "scram_credentials", None)
        if current is None:
            current = {}
            store.scram_credentials = current
        for user, c in creds.items():
            current.setdefault(user, {}).update(c)

    # -- the clients' side ----------------------------------------------------------------------

    def password(self, user: str) -> str:
        if user == BROKER_USER:
            return self.broker_password
        try:
            return self.users[user]
        except KeyError:
            raise KeyError(f"no user {user!r} (users: {', '.join(self.users)})") from None

    def _user(self, user: str | None) -> str:
        if user is None:
            return next(iter(self.users)) if self.users else BROKER_USER
        self.password(user)  # known?
        return user

    def principal(self, user: str | None = None) -> str:
        """The principal a client of `user` gets (`User:<name>`; TLS alone: User:ANONYMOUS)."""
        if not self.uses_sasl and self.kind != "mtls":
            return "User:ANONYMOUS"
        return f"User:{self._user(user)}"

    def client_config(self, bootstrap: str, user: str | None = None) -> dict[str, Any]:
        """librdkafka properties (confluent-kafka, kcat -X) for `user` (default: the first)."""
        name = self._user(user)
        conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": self.protocol}
        if self.tls is not None:
            conf["ssl.ca.location"] = self.tls.ca
            conf["ssl.endpoint.identification.algorithm"] = "https"
        if self.kind == "mtls":
            cert = self.client_certs[name]
            conf["ssl.certificate.location"] = cert.cert
            conf["ssl.key.location"] = cert.key
        if self.mechanism is not None:
            conf["sasl.mechanism"] = self.mechanism
            if self.mechanism == "OAUTHBEARER":
                conf["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
                conf["sasl.oauthbearer.config"] = f"principal={name}"
            else:
                conf["sasl.username"] = name
                conf["sasl.password"] = self.password(name)
        return conf

    @property
    def registry_basic_auth(self) -> bool:
        """The built-in Schema Registry asks for HTTP Basic: the users are SASL PLAIN or SCRAM
        ones (OAUTHBEARER has no passwords)."""
        return self.mechanism is not None and self.mechanism != "OAUTHBEARER"

    def registry_client_config(self, user: str | None = None) -> dict[str, str]:
        """confluent-kafka SchemaRegistryClient settings (all but `url`) for `user`."""
        name = self._user(user)
        conf: dict[str, str] = {}
        if self.tls is not None:
            conf["ssl.ca.location"] = self.tls.ca
        if self.kind == "mtls":
            conf["ssl.certificate.location"] = self.client_certs[name].cert
            conf["ssl.key.location"] = self.client_certs[name].key
        if self.registry_basic_auth:
            conf["basic.auth.user.info"] = f"{name}:{self.password(name)}"
        return conf

    def kcat_args(self, bootstrap: str, user: str | None = None) -> list[str]:
        """`-b BOOTSTRAP -X key=value ...` for kcat."""
        args = ["-b", bootstrap]
        for key, value in self.client_config(bootstrap, user).items():
            if key != "bootstrap.servers":
                args += ["-X", f"{key}={value}"]
        return args

    def kafka_python_config(self, bootstrap: str, user: str | None = None) -> dict[str, Any]:
        """Keyword arguments for kafka-python's KafkaProducer / KafkaConsumer / KafkaAdminClient."""
        name = self._user(user)
        kw: dict[str, Any] = {"bootstrap_servers": bootstrap, "security_protocol": self.protocol}
        if self.tls is not None:
            kw["ssl_cafile"] = self.tls.ca
        if self.kind == "mtls":
            kw["ssl_certfile"] = self.client_certs[name].cert
            kw["ssl_keyfile"] = self.client_certs[name].key
        if self.mechanism is not None:
            kw["sasl_mechanism"] = self.mechanism
            if self.mechanism == "OAUTHBEARER":
                kw["sasl_oauth_token_provider"] = _kafka_python_token_provider(name)
            else:
                kw["sasl_plain_username"] = name
                kw["sasl_plain_password"] = self.password(name)
        return kw

    def ssl_context(self, user: str | None = None) -> ssl.SSLContext | None:
        """A client TLS context trusting the CA (with the user's certificate under mTLS)."""
        if self.tls is None:
            return None
        ctx = ssl.create_default_context(cafile=self.tls.ca)
        if self.kind == "mtls":
            cert = self.client_certs[self._user(user)]
            ctx.load_cert_chain(cert.cert, cert.key)
        return ctx

    def aiokafka_config(self, bootstrap: str, user: str | None = None) -> dict[str, Any]:
        """Keyword arguments for aiokafka's AIOKafkaProducer / AIOKafkaConsumer / admin."""
        name = self._user(user)
        kw: dict[str, Any] = {"bootstrap_servers": bootstrap, "security_protocol": self.protocol}
        if self.tls is not None:
            kw["ssl_context"] = self.ssl_context(name)
        if self.mechanism is not None:
            kw["sasl_mechanism"] = self.mechanism
            if self.mechanism == "OAUTHBEARER":
                kw["sasl_oauth_token_provider"] = _aiokafka_token_provider(name)
            else:
                kw["sasl_plain_username"] = name
                kw["sasl_plain_password"] = self.password(name)
        return kw

    def java_properties(self, bootstrap: str, user: str | None = None) -> dict[str, str]:
        """kafka-clients properties (Java clients; Kafka's tools' --command-config)."""
        name = self._user(user)
        props = {"bootstrap.servers": bootstrap, "security.protocol": self.protocol}
        if self.tls is not None:
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = self.tls.ca
        if self.kind == "mtls":
            cert = self.client_certs[name]
            with open(cert.cert, encoding="ascii") as f:
                chain = f.read()
            with open(cert.key, encoding="ascii") as f:
                key = f.read()
            # inline PEM: a key store file would need an encrypted key (ssl.key.password)
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.certificate.chain"] = chain
            props["ssl.keystore.key"] = key
        if self.mechanism is not None:
            props["sasl.mechanism"] = self.mechanism
            module = _LOGIN_MODULES[self.mechanism]
            if self.mechanism == "OAUTHBEARER":
                opts = f"unsecuredLoginStringClaim_sub={_quote(name)}"
            else:
                opts = f"username={_quote(name)} password={_quote(self.password(name))}"
            props["sasl.jaas.config"] = f"{module} required {opts};"
        return props

    def write_properties(
        self, path: str, bootstrap: str, user: str | None = None, flavour: str = "java"
    ) -> str:
        """Write a properties file ("java": kafka-clients / Kafka's tools; "librdkafka":
        kcat -F, confluent-kafka); returns `path`."""
        if flavour == "java":
            items = self.java_properties(bootstrap, user)
        elif flavour == "librdkafka":
            items = {k: str(v) for k, v in self.client_config(bootstrap, user).items()}
        else:
            raise ValueError("flavour must be java or librdkafka")
        with open(path, "w", encoding="utf-8") as f:
            for key, value in items.items():
                f.write(f"{key}={_escape_property(value)}\n")
        return path

    def describe(self, bootstrap: str, user: str | None = None) -> dict[str, Any]:
        """Write the client properties files of `user` (default: the first) into the security
        directory (client.properties for librdkafka / kcat -F, client-java.properties for Java
        clients and Kafka's tools); what `odradek dev` / `odradek cluster` print about them."""
        name = self._user(user)
        props = self.write_properties(
            os.path.join(self.directory, "client.properties"), bootstrap, name, "librdkafka"
        )
        java = self.write_properties(
            os.path.join(self.directory, "client-java.properties"), bootstrap, name, "java"
        )
        return {
            "protocol": self.protocol,
            "mechanism": self.mechanism,
            "user": name,
            "principal": self.principal(name),
            "users": dict(self.users),
            "ca": self.tls.ca if self.tls is not None else None,
            "properties": props,
            "java_properties": java,
            "client_config": {k: str(v) for k, v in self.client_config(bootstrap, name).items()},
            "kcat_args": self.kcat_args(bootstrap, name),
        }


def print_client_properties(info: Mapping[str, Any]) -> None:
    """Print `Security.describe()`'s result: the librdkafka properties, the files, a kcat line."""
    import shlex

    what = info["protocol"] + (f" ({info['mechanism']})" if info["mechanism"] else "")
    print(f"# {what} client properties for {info['principal']}:", flush=True)
    for key, value in info["client_config"].items():
        print(f"{key}={value}")
    print(f"# librdkafka / kcat -F: {info['properties']}")
    print(f"# Java clients, Kafka's tools --command-config: {info['java_properties']}")
    print("# kcat " + " ".join(shlex.quote(a) for a in info["kcat_args"]) + " -L", flush=True)


def _escape_property(value: str) -> str:
    """A value as java.util.Properties reads it back (newlines of inline PEM as \\n)."""
    return (
        value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    )


def _token(principal: str) -> str:
    # iat in whole milliseconds, as Kafka's unsecured login makes it: a sub-millisecond iat
    # can be "after" the broker's clock read in the same millisecond
    return unsecured_token(principal, now_s=int(time.time() * 1000) / 1000)


def _kafka_python_token_provider(principal: str) -> Any:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return _token(principal)

    return Provider()


def _aiokafka_token_provider(principal: str) -> Any:
    from aiokafka.abc import AbstractTokenProvider  # type: ignore[import-untyped]

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return _token(principal)

    return Provider()


class ClientSettings:
    """The per-client settings of a test broker or cluster (its `security`, or plain
    bootstrap without one): shared by `odradek.testing.Broker` and `Cluster`."""

    security: Security | None

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    def client_config(self, user: str | None = None) -> dict[str, Any]:
        """librdkafka properties (confluent-kafka, kcat -X) for `user` (default: the first):
        bootstrap.servers, security.protocol, sasl.*, ssl.ca.location, ..."""
        if self.security is None:
            return {"bootstrap.servers": self.bootstrap}
        return self.security.client_config(self.bootstrap, user)

    def kafka_python_config(self, user: str | None = None) -> dict[str, Any]:
        """Keyword arguments for kafka-python's clients."""
        if self.security is None:
            return {"bootstrap_servers": self.bootstrap}
        return self.security.kafka_python_config(self.bootstrap, user)

    def aiokafka_config(self, user: str | None = None) -> dict[str, Any]:
        """Keyword arguments for aiokafka's clients."""
        if self.security is None:
            return {"bootstrap_servers": self.bootstrap}
        return self.security.aiokafka_config(self.bootstrap, user)

    def java_properties(self, user: str | None = None) -> dict[str, str]:
        """kafka-clients properties (Java clients, Kafka's tools' --command-config)."""
        if self.security is None:
            return {"bootstrap.servers": self.bootstrap}
        return self.security.java_properties(self.bootstrap, user)
