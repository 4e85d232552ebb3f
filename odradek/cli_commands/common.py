"""Shared plumbing of the client commands: options, Kafka clients, one-line errors.

Every client command speaks the Kafka protocol through kafka-python's KafkaAdminClient,
KafkaProducer and KafkaConsumer, so it works against any broker, Kafka itself included.
`--bootstrap-server` (env ODRADEK_BOOTSTRAP, default localhost:9092) and `--json` are accepted
before or after the subcommand (`odradek topics --json list` and `odradek topics list --json`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Collection
from typing import Any

from odradek.cli_commands.output import CliError

DEFAULT_BOOTSTRAP = "localhost:9092"
BOOTSTRAP_ENV = "ODRADEK_BOOTSTRAP"
BOOTSTRAP_TIMEOUT_MS = 10000
REQUEST_TIMEOUT_MS = 30000


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """--bootstrap-server and --json; SUPPRESS defaults so a subcommand's parser does not
    overwrite what was given before it (argparse copies sub-parser defaults over parents)."""
    parser.add_argument(
        "--bootstrap-server",
        "-b",
        default=argparse.SUPPRESS,
        metavar="HOST:PORT",
        help=f"broker to connect to (env {BOOTSTRAP_ENV}, default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
    )
    parser.add_argument(
        "--connect-timeout-ms",
        type=int,
        default=argparse.SUPPRESS,
        metavar="MS",
        help=f"give up reaching the cluster after this long (default {BOOTSTRAP_TIMEOUT_MS})",
    )
    parser.add_argument(
        "--command-config",
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="client properties for a secured cluster, as Kafka's tools take them "
        "(security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)",
    )


def bootstrap(args: argparse.Namespace) -> str:
    return (
        getattr(args, "bootstrap_server", None)
        or os.environ.get(BOOTSTRAP_ENV)
        or DEFAULT_BOOTSTRAP
    )


def connect_timeout_ms(args: argparse.Namespace) -> int:
    return int(getattr(args, "connect_timeout_ms", None) or BOOTSTRAP_TIMEOUT_MS)


def want_json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False))


def quiet_client_logs() -> None:
    """kafka-python logs connection retries at WARNING/ERROR; the CLI reports failures itself."""
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("kafka").setLevel(logging.CRITICAL)


def error_message(exc: BaseException) -> str:
    """One line for a kafka-python error: Kafka's error name, then what the broker said."""
    import kafka.errors as errors

    if isinstance(exc, errors.KafkaTimeoutError) and "bootstrap" in str(exc).lower():
        return f"cannot connect to a broker: {exc.args[0] if exc.args else exc}"
    if type(exc).__name__ in ("NoBrokersAvailable", "KafkaConnectionError"):
        return f"cannot connect to a broker: {exc}"
    if isinstance(exc, errors.IncompatibleBrokerVersion):
        return f"the broker does not support this operation: {exc.args[0] if exc.args else exc}"
    if isinstance(exc, errors.BrokerResponseError):
        detail = " ".join(str(a) for a in exc.args if a) or exc.description
        return f"{exc.message}: {detail}"
    if isinstance(exc, errors.KafkaError):
        detail = " ".join(str(a) for a in exc.args if a)
        return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return str(exc) or type(exc).__name__


_RESULT = re.compile(r"^\[Error (-?\d+)\] \w+: ?(.*)$", re.S)


def result_message(text: str) -> str:
    """kafka-python's per-resource result string ("[Error 40] InvalidConfigurationError: why")
    as Kafka's error name and the broker's message ("INVALID_CONFIG: why")."""
    m = _RESULT.match(text)
    if not m:
        return text
    return (
        f"{error_name(int(m.group(1)))}: {m.group(2)}"
        if m.group(2)
        else error_name(int(m.group(1)))
    )


def error_name(code_or_cls: Any) -> str:
    """Kafka's name for an error code or a kafka-python error class (NONE for success)."""
    import kafka.errors as errors

    cls = errors.for_code(code_or_cls) if isinstance(code_or_cls, int) else code_or_cls
    if cls is errors.NoError:
        return "NONE"
    return str(getattr(cls, "message", None) or getattr(cls, "__name__", str(cls)))


def default_hint(message: str, args: argparse.Namespace) -> str:
    """Nothing answers at the default bootstrap (no -b, no ODRADEK_BOOTSTRAP): say where the
    command looked and how to point it elsewhere."""
    defaulted = not getattr(args, "bootstrap_server", None) and not os.environ.get(BOOTSTRAP_ENV)
    if not defaulted or not message.startswith("cannot connect to a broker"):
        return message
    return (
        f"{message} ({DEFAULT_BOOTSTRAP} is the default: start a broker there with `odradek dev`"
        f" or `odradek serve`, or give --bootstrap-server HOST:PORT / {BOOTSTRAP_ENV})"
    )


def run_command(
    fn: Callable[[argparse.Namespace], int | None],
) -> Callable[[argparse.Namespace], int]:
    """Wrap a command: kafka-python and our errors become one line on stderr and status 1."""

    def wrapper(args: argparse.Namespace) -> int:
        # kafka-python is imported only when an error needs naming (its import costs ~150 ms,
        # a large part of a short `odradek produce`)
        quiet_client_logs()
        try:
            try:
                status = fn(args)
            except CliError as exc:
                print(f"odradek: {default_hint(str(exc), args)}", file=sys.stderr)
                return exc.status
            except Exception as exc:
                errors = sys.modules.get("kafka.errors")  # set if a kafka error can exist
                if errors is None or not isinstance(exc, errors.KafkaError):
                    raise
                print(f"odradek: {default_hint(error_message(exc), args)}", file=sys.stderr)
                return 1
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            # stdout closed early (`odradek consume ... | head`): not an error. Point stdout
            # at /dev/null so the interpreter's final flush does not complain.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except (OSError, ValueError, RuntimeError) as exc:
            if logging.getLogger().isEnabledFor(logging.DEBUG):
                traceback.print_exc()
            print(f"odradek: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        return int(status or 0)

    wrapper.__name__ = getattr(fn, "__name__", "command")
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _jaas_option(jaas: str, key: str) -> str | None:
    m = re.search(rf'\b{key}\s*=\s*"([^"]*)"', jaas)
    return m.group(1) if m else None


def _pem_file(text: str) -> str:
    """An inline PEM (ssl.keystore.certificate.chain / ssl.keystore.key) as a private file:
    kafka-python reads certificates from files."""
    import os
    import tempfile

    fd, path = tempfile.mkstemp(prefix="odradek-cli-", suffix=".pem")
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text.replace("\\n", "\n"))
    return path


def _store_kind(path: str, declared: str | None) -> str:
    """ssl.*store.type, or when unset: PEM for a PEM file, else JKS (Kafka's default, which
    also reads PKCS12 files)."""
    if declared and declared.strip():
        return declared.strip().upper()
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return "PEM"  # the client reports the missing file
    return "PEM" if b"-----BEGIN" in head else "JKS"


def _java_store(
    path: str, kind: str, password: str | None, key_password: str | None = None
) -> tuple[bytes, bytes | None]:
    """(certificates PEM, private key PEM or None) of a JKS or PKCS12 store, as Kafka's clients
    read ssl.truststore.* / ssl.keystore.*: a trust store gives its trusted certificates, a key
    store its first key entry's chain and key (decrypted)."""
    from odradek.security import jks

    if kind not in ("JKS", "PKCS12"):
        raise CliError(f"--command-config: store type {kind} is not supported (JKS, PKCS12, PEM)")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise CliError(f"--command-config: cannot read {path}: {exc.strerror or exc}") from None
    if jks.is_jks(data):
        try:
            store = jks.parse_jks(data, password, key_password)
        except jks.JksError as exc:
            raise CliError(f"--command-config: {path}: {exc}") from None
        if store.keys:
            first = store.keys[0]
            return first.chain_pem + b"".join(store.certificates), first.key_pem
        return b"".join(store.certificates), None
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    try:
        private, cert, extra = pkcs12.load_key_and_certificates(
            data, password.encode() if password else None
        )
    except ValueError as exc:
        raise CliError(f"--command-config: cannot open {path} (wrong password?): {exc}") from None
    certs = ([cert] if cert is not None else []) + list(extra or [])
    pem = b"".join(c.public_bytes(Encoding.PEM) for c in certs)
    key = (
        private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        if private is not None
        else None
    )
    return pem, key


SECURITY_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.jaas.config",
        "sasl.username",
        "sasl.password",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.ca.location",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
    }
)


def security_settings(props: dict[str, str]) -> dict[str, Any]:
    """kafka-python settings from Kafka (or librdkafka) client security properties: the
    protocol, the SASL mechanism and credentials (sasl.jaas.config's username/password, or
    sasl.username/sasl.password), the CA and, for mutual TLS, the client certificate (PEM
    files, or Kafka's inline PEM keystore)."""
    out: dict[str, Any] = {}
    if props.get("security.protocol"):
        out["security_protocol"] = props["security.protocol"].strip().upper()
    if props.get("sasl.mechanism"):
        out["sasl_mechanism"] = props["sasl.mechanism"].strip().upper()
    jaas = props.get("sasl.jaas.config") or ""
    user = props.get("sasl.username") or _jaas_option(jaas, "username")
    password = props.get("sasl.password") or _jaas_option(jaas, "password")
    if user is not None and password is not None:
        out["sasl_plain_username"], out["sasl_plain_password"] = user, password
    ca = props.get("ssl.truststore.location") or props.get("ssl.ca.location")
    if ca:
        kind = _store_kind(ca.strip(), props.get("ssl.truststore.type"))
        if kind != "PEM" and not props.get("ssl.ca.location"):
            certs, _key = _java_store(ca.strip(), kind, props.get("ssl.truststore.password"))
            out["ssl_cafile"] = _pem_file(certs.decode())
        else:
            out["ssl_cafile"] = ca.strip()
    cert = props.get("ssl.certificate.location")
    key = props.get("ssl.key.location")
    if props.get("ssl.keystore.certificate.chain") and props.get("ssl.keystore.key"):
        cert = _pem_file(props["ssl.keystore.certificate.chain"])
        key = _pem_file(props["ssl.keystore.key"])
    elif props.get("ssl.keystore.location") and not cert:
        cert = key = props["ssl.keystore.location"].strip()
        kind = _store_kind(cert, props.get("ssl.keystore.type"))
        if kind != "PEM":
            chain, key_pem = _java_store(
                cert, kind, props.get("ssl.keystore.password"), props.get("ssl.key.password")
            )
            if key_pem is None:
                raise CliError(f"--command-config: ssl.keystore.location {cert} holds no key")
            cert, key = _pem_file(chain.decode()), _pem_file(key_pem.decode())
            props = {k: v for k, v in props.items() if k != "ssl.key.password"}
    if cert:
        out["ssl_certfile"] = cert
        out["ssl_keyfile"] = key or cert
    if props.get("ssl.key.password"):
        out["ssl_password"] = props["ssl.key.password"]
    if (props.get("ssl.endpoint.identification.algorithm") or "https").strip() == "":
        out["ssl_check_hostname"] = False
    return out


def command_config(args: argparse.Namespace) -> dict[str, Any]:
    """The kafka-python security settings of --command-config (empty without it)."""
    path = getattr(args, "command_config", None)
    if not path:
        return {}
    try:
        props = read_properties(path)
    except OSError as exc:
        raise CliError(f"cannot read --command-config {path}: {exc.strerror or exc}") from None
    return security_settings(props)


def check_reachable(args: argparse.Namespace, settings: dict[str, Any]) -> None:
    """Fail at once, in one line, when the bootstrap servers cannot serve a client with these
    kafka-python `settings` (cli_commands/reachability.py), instead of after the timeout."""
    from odradek.cli_commands.reachability import check_bootstrap

    protocol = str(settings.get("security_protocol") or "PLAINTEXT").upper()
    servers = settings.get("bootstrap_servers") or bootstrap(args)
    check_bootstrap(servers, connect_timeout_ms(args), plaintext=protocol == "PLAINTEXT")


def admin_client(args: argparse.Namespace) -> Any:
    from kafka.admin import KafkaAdminClient

    security = command_config(args)
    check_reachable(args, security)
    return KafkaAdminClient(
        **security,
        bootstrap_servers=bootstrap(args),
        client_id="odradek-cli",
        bootstrap_timeout_ms=connect_timeout_ms(args),
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )


def parse_key_values(items: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"{option} needs key=value, got {item!r}")
        out[key] = value
    return out


def check_add_delete(adds: Collection[str], deletes: Collection[str]) -> None:
    """An --alter's --add-config and --delete-config keys: at least one, none in both."""
    if not adds and not deletes:
        raise CliError("--alter needs --add-config and/or --delete-config")
    both = sorted(set(adds) & set(deletes))
    if both:
        raise CliError(f"{', '.join(both)} is both added and deleted")


class Closing:
    """Close a kafka-python client at the end of a `with` block, quietly."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __enter__(self) -> Any:
        return self.client

    def __exit__(self, *exc: object) -> None:
        try:
            self.client.close()
        except Exception:  # noqa: BLE001  (closing must not hide the real outcome)
            pass


def read_json_file(path: str) -> Any:
    """The JSON document in the file at `path`; a file that cannot be read or is not JSON is a
    CliError naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{path} is not JSON: {exc}") from None


def read_properties(path: str) -> dict[str, str]:
    """A Java .properties file (`key=value`, `key: value` or `key value`; `#` and `!` start a
    comment line), as Kafka's tools read --producer.config / --consumer.config."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    pending = ""
    for raw in lines:
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if m is None:
            out[line] = ""
        else:
            out[m.group(1)] = m.group(2)
    return out
