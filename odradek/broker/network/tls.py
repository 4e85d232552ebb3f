"""TLS for SSL and SASL_SSL listeners: an `ssl.SSLContext` built from Kafka's `ssl.*` keys.

Each key is read for the listener first (`listener.name.<name>.ssl.keystore.location`), then
unprefixed, as Kafka's ListenerName.configPrefix does. What Kafka takes and this takes:

- keystore: `ssl.keystore.type` PEM (a file at `ssl.keystore.location` holding the certificate
  chain and the private key, or the inline `ssl.keystore.certificate.chain` and
  `ssl.keystore.key`) or PKCS12 (`ssl.keystore.location` with `ssl.keystore.password`);
  `ssl.key.password` decrypts an encrypted PEM key. JKS is Java's own format and is refused
  with the advice to convert it (keytool -importkeystore -deststoretype PKCS12).
- truststore (the CAs client certificates are checked against): `ssl.truststore.type` PEM
  (`ssl.truststore.location`, or the inline `ssl.truststore.certificates`) or PKCS12.
- `ssl.client.auth` none | requested | required (mutual TLS).
- `ssl.enabled.protocols` (TLSv1.2, TLSv1.3) and `ssl.cipher.suites` (OpenSSL names).

A client certificate's subject becomes the connection's principal through
`ssl.principal.mapping.rules` (odradek/security/principal.py, listeners.py).

A configuration that cannot work (no keystore, an unreadable file, a wrong password) raises
`ConfigError` with one line naming the key, so the broker stops at start.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable

from odradek.broker.config import ConfigValue
from odradek.log.config import ConfigError

CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}

Getter = Callable[[str], ConfigValue]  # a key's configured value or None


def _text(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _password(value: object) -> bytes | None:
    text = _text(value)
    return text.encode() if text is not None else None


def _pkcs12(path: str, password: bytes | None, key: str) -> tuple[bytes, bytes | None, list[bytes]]:
    """(certificate chain PEM, private key PEM or None, CA certificates PEM) of a PKCS12 file."""
    try:
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
            pkcs12,
        )
    except ImportError:
        raise ConfigError(f"{key}: PKCS12 stores need the `cryptography` package") from None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror}") from None
    try:
        private, cert, extra = pkcs12.load_key_and_certificates(data, password)
    except ValueError as exc:
        raise ConfigError(f"{key}: cannot open {path} (wrong password?): {exc}") from None
    chain = b""
    if cert is not None:
        chain += cert.public_bytes(Encoding.PEM)
    others = [c.public_bytes(Encoding.PEM) for c in extra or []]
    key_pem = None
    if private is not None:
        key_pem = private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        chain += b"".join(others)
    return chain, key_pem, others


def _load_chain(
    ctx: ssl.SSLContext, chain: bytes, key: bytes | None, password: bytes | None
) -> None:
    """`load_cert_chain` reads files only: the PEM goes through a private temporary file."""
    fd, path = tempfile.mkstemp(prefix="odradek-tls-", suffix=".pem")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(chain if key is None else chain + b"\n" + key)
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _keystore(ctx: ssl.SSLContext, value: Getter, listener: str) -> None:
    kind = (_text(value("ssl.keystore.type")) or "JKS").upper()
    location = _text(value("ssl.keystore.location"))
    inline_chain = _text(value("ssl.keystore.certificate.chain"))
    inline_key = _text(value("ssl.keystore.key"))
    key_password = _password(value("ssl.key.password"))
    store_password = _password(value("ssl.keystore.password"))
    where = f"listener {listener}"
    if inline_chain or inline_key:
        if not (inline_chain and inline_key):
            raise ConfigError(
                f"{where}: ssl.keystore.certificate.chain and ssl.keystore.key go together"
            )
        try:
            _load_chain(ctx, inline_chain.encode(), inline_key.encode(), key_password)
        except ssl.SSLError as exc:
            raise ConfigError(f"{where}: ssl.keystore.key / certificate.chain: {exc}") from None
        return
    if location is None:
        raise ConfigError(
            f"{where}: an SSL listener needs a server certificate: set ssl.keystore.location "
            "(ssl.keystore.type=PEM or PKCS12) or ssl.keystore.certificate.chain and "
            "ssl.keystore.key"
        )
    if kind == "PEM":
        try:
            ctx.load_cert_chain(location, password=key_password)
        except FileNotFoundError:
            raise ConfigError(f"{where}: ssl.keystore.location {location} does not exist") from None
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(
                f"{where}: cannot load ssl.keystore.location {location}: {exc}"
            ) from None
    elif kind == "PKCS12":
        chain, key, _cas = _pkcs12(location, store_password, "ssl.keystore.location")
        if key is None:
            raise ConfigError(f"{where}: {location} holds no private key")
        try:
            _load_chain(ctx, chain, key, None)
        except ssl.SSLError as exc:
            raise ConfigError(f"{where}: cannot use {location}: {exc}") from None
    else:
        raise ConfigError(
            f"{where}: ssl.keystore.type {kind} is not supported (PEM or PKCS12; convert a JKS "
            "store with keytool -importkeystore -deststoretype PKCS12)"
        )


def _truststore(ctx: ssl.SSLContext, value: Getter, listener: str) -> bool:
    """Load the CAs client certificates are checked against; False when none is configured."""
    kind = (_text(value("ssl.truststore.type")) or "JKS").upper()
    location = _text(value("ssl.truststore.location"))
    inline = _text(value("ssl.truststore.certificates"))
    where = f"listener {listener}"
    try:
        if inline:
            ctx.load_verify_locations(cadata=inline)
            return True
        if location is None:
            return False
        if kind == "PEM":
            ctx.load_verify_locations(cafile=location)
        elif kind == "PKCS12":
            password = _password(value("ssl.truststore.password"))
            chain, _key, cas = _pkcs12(location, password, "ssl.truststore.location")
            ctx.load_verify_locations(cadata=(chain + b"".join(cas)).decode())
        else:
            raise ConfigError(
                f"{where}: ssl.truststore.type {kind} is not supported (PEM or PKCS12)"
            )
    except FileNotFoundError:
        raise ConfigError(f"{where}: ssl.truststore.location {location} does not exist") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"{where}: cannot load the truststore: {exc}") from None
    return True


def server_context(value: Getter, listener: str) -> ssl.SSLContext:
    """The server side of one SSL / SASL_SSL listener."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    enabled = [
        p.strip() for p in str(value("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",")
    ]
    versions = [PROTOCOLS[p] for p in enabled if p in PROTOCOLS]
    if not versions:
        raise ConfigError(
            f"listener {listener}: ssl.enabled.protocols {enabled} has none of TLSv1.2, TLSv1.3"
        )
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)
    ciphers = _text(value("ssl.cipher.suites"))
    if ciphers:
        try:
            ctx.set_ciphers(ciphers.replace(",", ":").replace(" ", ""))
        except ssl.SSLError:
            raise ConfigError(
                f"listener {listener}: no usable cipher in ssl.cipher.suites"
            ) from None
    _keystore(ctx, value, listener)
    auth = (_text(value("ssl.client.auth")) or "none").lower()
    if auth not in CLIENT_AUTH:
        raise ConfigError(
            f"listener {listener}: ssl.client.auth must be none, requested or required"
        )
    has_trust = _truststore(ctx, value, listener)
    if auth != "none" and not has_trust:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = CLIENT_AUTH[auth]
    return ctx


def client_context(value: Getter, listener: str) -> ssl.SSLContext:
    """The client side, for this broker's connections to other brokers on an SSL listener:
    the truststore verifies them, the keystore is presented when they ask for a certificate.
    Host names are checked when `ssl.endpoint.identification.algorithm` is https (Kafka's
    default), as Kafka does."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if not _truststore(ctx, value, listener):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    algorithm = value("ssl.endpoint.identification.algorithm")
    ctx.check_hostname = str(algorithm if algorithm is not None else "https").lower() == "https"
    if _text(value("ssl.keystore.location")) or _text(value("ssl.keystore.certificate.chain")):
        _keystore(ctx, value, listener)
    return ctx
