"""Java KeyStore (JKS) files, read as Kafka's `ssl.keystore.type=JKS` / `ssl.truststore.type=JKS`
(Kafka's default store type) expect them: `parse_jks(data, store_password)` gives the private
keys with their certificate chains and the trusted certificates, as PEM for Python's `ssl`.

The format (sun.security.provider.JavaKeyStore), big-endian throughout:

    magic           u32     0xFEEDFEED
    version         u32     1 or 2 (2 names each certificate's type)
    count           u32     entries, then per entry:
      tag           u32     1 private key, 2 trusted certificate
      alias         UTF     u16 length, modified UTF-8
      timestamp     u64     milliseconds, ignored
      tag 1:  protected key   u32 length, DER EncryptedPrivateKeyInfo (below)
              chain count     u32, then per certificate: [type UTF (v2)], u32 length, DER
      tag 2:  certificate     [type UTF (v2)], u32 length, DER
    digest          20      SHA-1(password as UTF-16BE, b"Mighty Aphrodite", everything above)

A private key is protected with Sun's own algorithm (KeyProtector, OID 1.3.6.1.4.1.42.2.17.1.1):
the encrypted data is salt (20) || key XOR keystream || check (20), where the keystream is
SHA-1(password || salt), then SHA-1(password || previous block) ..., and check is
SHA-1(password || key); the key is PKCS#8 PrivateKeyInfo DER. The password is the key's
(`ssl.key.password`), else the store's, as Kafka's SslFactory does.

Since Java 9 a "JKS" store may hold PKCS12 data (keystore.type.compat): `is_jks` tells them
apart by the magic. JCEKS (0xCECECECE) stores are refused with a message.
"""

from __future__ import annotations

import base64
import hashlib
import ssl
import struct
from dataclasses import dataclass, field

MAGIC = 0xFEEDFEED
JCEKS_MAGIC = 0xCECECECE
PRIVATE_KEY, TRUSTED_CERT = 1, 2
WHITENER = b"Mighty Aphrodite"
SUN_KEY_PROTECTOR = "1.3.6.1.4.1.42.2.17.1.1"
DIGEST_SIZE = 20


class JksError(ValueError):
    """A store that cannot be read: damaged, a wrong password, an unsupported kind."""


@dataclass(slots=True)
class KeyEntry:
    alias: str
    key_pem: bytes  # PKCS#8 PRIVATE KEY
    chain_pem: bytes  # the certificates, the entry's own first


@dataclass(slots=True)
class KeyStore:
    keys: list[KeyEntry] = field(default_factory=list)
    certificates: list[bytes] = field(default_factory=list)  # trusted, PEM each


def is_jks(data: bytes) -> bool:
    return data[:4] == struct.pack(">I", MAGIC)


def _password_bytes(password: str) -> bytes:
    """Java's char[] as bytes: UTF-16BE, two bytes a char."""
    return password.encode("utf-16-be")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise JksError("the key store ends early (a damaged file?)")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def utf(self) -> str:
        (length,) = struct.unpack(">H", self.take(2))
        return self.take(length).decode("utf-8", errors="replace")


def _cert_pem(der: bytes) -> bytes:
    return ssl.DER_cert_to_PEM_cert(der).encode("ascii")


def _der(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of contents, end of contents) of the DER element at `pos`."""
    if pos + 2 > len(data):
        raise JksError("bad protected key encoding")
    tag, first = data[pos], data[pos + 1]
    pos += 2
    if first < 0x80:
        length = first
    else:
        n = first & 0x7F
        if n == 0 or n > 4 or pos + n > len(data):
            raise JksError("bad protected key encoding")
        length = int.from_bytes(data[pos : pos + n], "big")
        pos += n
    if pos + length > len(data):
        raise JksError("bad protected key encoding")
    return tag, pos, pos + length


def _oid(body: bytes) -> str:
    first, value = body[0], 0
    parts = [str(first // 40), str(first % 40)]
    for byte in body[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(str(value))
            value = 0
    return ".".join(parts)


def _encrypted_key(protected: bytes) -> bytes:
    """The encrypted data of an EncryptedPrivateKeyInfo protected with Sun's KeyProtector."""
    tag, start, end = _der(protected, 0)
    if tag != 0x30:
        raise JksError("bad protected key encoding")
    tag, alg_start, alg_end = _der(protected, start)
    tag_oid, oid_start, oid_end = _der(protected, alg_start)
    if tag != 0x30 or tag_oid != 0x06:
        raise JksError("bad protected key encoding")
    algorithm = _oid(protected[oid_start:oid_end])
    if algorithm != SUN_KEY_PROTECTOR:
        raise JksError(f"key protected with {algorithm}, not JKS's own algorithm")
    tag, data_start, data_end = _der(protected, alg_end)
    if tag != 0x04:
        raise JksError("bad protected key encoding")
    return protected[data_start:data_end]


def _recover_key(encrypted: bytes, password: bytes) -> bytes:
    """KeyProtector.recover: the PKCS#8 key, or JksError for a wrong password."""
    if len(encrypted) < 2 * DIGEST_SIZE:
        raise JksError("bad protected key encoding")
    salt = encrypted[:DIGEST_SIZE]
    body = encrypted[DIGEST_SIZE:-DIGEST_SIZE]
    check = encrypted[-DIGEST_SIZE:]
    stream = bytearray()
    block = salt
    while len(stream) < len(body):
        block = hashlib.sha1(password + block).digest()
        stream += block
    key = bytes(a ^ b for a, b in zip(body, stream, strict=False))
    if hashlib.sha1(password + key).digest() != check:
        raise JksError("cannot recover the private key: wrong ssl.key.password?")
    return key


def _key_pem(pkcs8: bytes) -> bytes:
    lines = base64.encodebytes(pkcs8).replace(b"\n", b"")
    wrapped = b"\n".join(lines[i : i + 64] for i in range(0, len(lines), 64))
    return b"-----BEGIN PRIVATE KEY-----\n" + wrapped + b"\n-----END PRIVATE KEY-----\n"


def parse_jks(data: bytes, store_password: str | None, key_password: str | None = None) -> KeyStore:
    """The entries of a JKS file. `store_password` checks the file's integrity (skipped when
    None, as Java's load with a null password); private keys are recovered with `key_password`,
    else `store_password`."""
    if data[:4] == struct.pack(">I", JCEKS_MAGIC):
        raise JksError("a JCEKS store: convert it with keytool -importkeystore -deststoretype JKS")
    reader = _Reader(data)
    if reader.u32() != MAGIC:
        raise JksError("not a JKS key store")
    version = reader.u32()
    if version not in (1, 2):
        raise JksError(f"JKS version {version} is not supported")
    if len(data) < DIGEST_SIZE + 12:
        raise JksError("the key store ends early (a damaged file?)")
    if store_password is not None:
        digest = hashlib.sha1(
            _password_bytes(store_password) + WHITENER + data[:-DIGEST_SIZE]
        ).digest()
        if digest != data[-DIGEST_SIZE:]:
            raise JksError("key store was tampered with, or its password is wrong")
    store = KeyStore()
    key_secret = key_password if key_password is not None else store_password
    for _ in range(reader.u32()):
        tag = reader.u32()
        alias = reader.utf()
        reader.take(8)  # timestamp
        if tag == PRIVATE_KEY:
            protected = reader.take(reader.u32())
            chain = b""
            for _ in range(reader.u32()):
                if version == 2:
                    reader.utf()  # "X.509"
                chain += _cert_pem(reader.take(reader.u32()))
            if key_secret is None:
                raise JksError(f"entry {alias!r} holds a private key: give its password")
            key = _recover_key(_encrypted_key(protected), _password_bytes(key_secret))
            store.keys.append(KeyEntry(alias, _key_pem(key), chain))
        elif tag == TRUSTED_CERT:
            if version == 2:
                reader.utf()
            store.certificates.append(_cert_pem(reader.take(reader.u32())))
        else:
            raise JksError(f"unknown JKS entry kind {tag}")
    if reader.pos != len(data) - DIGEST_SIZE:
        raise JksError("the key store has bytes after its entries (a damaged file?)")
    return store
