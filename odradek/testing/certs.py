"""Throwaway TLS material for tests: a CA, and server and client certificates it signs.

`TlsMaterial(directory)` writes PEM files a broker and its clients can use at once:
`ca.pem` (the CA certificate: the clients' ssl.ca.location and the broker's truststore),
`server.pem` (certificate chain then the private key: ssl.keystore.location with
ssl.keystore.type=PEM), and per client `<name>.crt` / `<name>.key` for mutual TLS. Keys are
EC P-256 (fast to make), certificates last a day, the server's names 127.0.0.1 and localhost.
Needs the `cryptography` package (a dependency of odradek).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ClientCert:
    cert: str  # path of the PEM certificate
    key: str  # path of the PEM private key (unencrypted)
    subject: str  # RFC 2253, as the broker sees it (e.g. "CN=alice,O=odradek-test")


class TlsMaterial:
    def __init__(self, directory: str, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._x509, self._hashes, self._ser, self._ec, self._oid = (
            x509,
            hashes,
            serialization,
            ec,
            NameOID,
        )
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "odradek test CA")])
        now = datetime.datetime.now(datetime.UTC)
        self._ca_name = name
        self._ca = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca_pem = self._ca.public_bytes(serialization.Encoding.PEM).decode()
        self.ca = self._write("ca.pem", self.ca_pem.encode())
        key, cert = self._issue("localhost", hosts, server=True)
        self.server_cert_pem = cert.decode()
        self.server_key_pem = key.decode()
        self.server = self._write("server.pem", cert + key)

    def _write(self, name: str, data: bytes) -> str:
        path = os.path.join(self.directory, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o600)
        return path

    def _issue(
        self, common_name: str, hosts: tuple[str, ...], server: bool, org: str | None = None
    ) -> tuple[bytes, bytes]:
        x509, hashes, ser, ec, NameOID = self._x509, self._hashes, self._ser, self._ec, self._oid
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if org:
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        now = datetime.datetime.now(datetime.UTC)
        builder: Any = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        if hosts:
            names: list[Any] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        usage = x509.oid.ExtendedKeyUsageOID
        builder = builder.add_extension(
            # a server certificate is also a client one: brokers present it to each other
            x509.ExtendedKeyUsage(
                [usage.SERVER_AUTH, usage.CLIENT_AUTH] if server else [usage.CLIENT_AUTH]
            ),
            critical=False,
        )
        cert = builder.sign(self._ca_key, hashes.SHA256())
        key_pem = key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())
        return key_pem, cert.public_bytes(ser.Encoding.PEM)

    def client(self, name: str, org: str = "odradek-test") -> ClientCert:
        """A client certificate for mutual TLS, subject CN=<name>,O=<org>."""
        key, cert = self._issue(name, (), server=False, org=org)
        return ClientCert(
            self._write(f"{name}.crt", cert), self._write(f"{name}.key", key), f"O={org},CN={name}"
        )

    def broker_config(self, client_auth: str = "none") -> dict[str, str]:
        """The broker's ssl.* keys for these files (PEM key store and trust store)."""
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.server,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca,
            "ssl.client.auth": client_auth,
        }
