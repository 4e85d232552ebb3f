"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka does them.

``ScramCredential`` is what a broker stores per user and mechanism (salt, StoredKey, ServerKey,
iterations), in ZooKeeper as ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
under the mechanism's name in ``/config/users/<sanitized user>`` (``credential_to_string``,
``credential_from_string``, ``user_config_to_credentials``). ``ScramServer`` is the broker side
of the exchange, ``ScramClient`` the client side (tests, inter-broker). Passwords are not
SASLprep-normalized (Kafka only UTF-8 encodes them); comparisons are constant-time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from odradek.security.errors import AuthenticationError
from odradek.wire.errors import ErrorCode

MAX_ITERATIONS = 16384
TOKEN_AUTH = "tokenauth"


class ScramMechanism(Enum):
    """Kafka's mechanisms with their wire type (AlterUserScramCredentials' ``mechanism``,
    0 is UNKNOWN there) and iteration bounds."""

    SCRAM_SHA_256 = (1, "sha256", 4096)
    SCRAM_SHA_512 = (2, "sha512", 4096)

    def __init__(self, wire_type: int, hash_name: str, min_iterations: int) -> None:
        self.wire_type = wire_type
        self.hash_name = hash_name
        self.min_iterations = min_iterations
        self.max_iterations = MAX_ITERATIONS

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism | None:
        """The mechanism called ``name`` (``SCRAM-SHA-256``), exactly as Kafka matches it."""
        for mechanism in cls:
            if mechanism.mechanism_name == name:
                return mechanism
        return None

    @classmethod
    def from_type(cls, wire_type: int) -> ScramMechanism | None:
        for mechanism in cls:
            if mechanism.wire_type == wire_type:
                return mechanism
        return None

    # The SCRAM functions of RFC 5802, section 2.2 and 3.

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i): PBKDF2 with the mechanism's HMAC."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def stored_key(self, client_key: bytes) -> bytes:
        return self.hash(client_key)

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")


@dataclass(frozen=True, repr=False)
class ScramCredential:
    """Kafka's ScramCredential. ``repr`` hides the keys (they are password equivalents)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(salt=[hidden], keys=[hidden], iterations={self.iterations})"


def random_salt() -> bytes:
    """A salt as Kafka's ScramFormatter makes one: the UTF-8 of a random base-36 string of 130
    bits (so about 26 ASCII bytes)."""
    return _base36(secrets.randbits(130)).encode("ascii")


def random_nonce() -> str:
    """A nonce as Kafka's server makes one (130 random bits, base 36)."""
    return _base36(secrets.randbits(130))


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rem = divmod(value, 36)
        out = digits[rem] + out
        if not value:
            return out


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """What the controller stores for an AlterUserScramCredentials upsertion: the client sends
    salt, SaltedPassword and iterations; StoredKey and ServerKey are derived here."""
    return ScramCredential(
        salt=salt,
        stored_key=mechanism.stored_key(mechanism.client_key(salted_password)),
        server_key=mechanism.server_key(salted_password),
        iterations=iterations,
    )


def generate_credential(
    mechanism: ScramMechanism,
    password: str,
    iterations: int = 4096,
    salt: bytes | None = None,
) -> ScramCredential:
    """A credential for ``password`` (Kafka's ScramFormatter.generateCredential); iterations
    below the mechanism's minimum (4096) are refused as Kafka's server would refuse them."""
    if iterations < mechanism.min_iterations:
        raise ValueError(
            f"Iterations {iterations} is less than the minimum {mechanism.min_iterations} "
            f"for {mechanism.mechanism_name}"
        )
    salt = random_salt() if salt is None else salt
    salted = mechanism.salted_password(password, salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


# ZooKeeper string form (ScramCredentialUtils).


def credential_to_string(credential: ScramCredential) -> str:
    """``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` (standard Base64)."""
    b64 = base64.b64encode
    return (
        f"salt={b64(credential.salt).decode()},stored_key={b64(credential.stored_key).decode()},"
        f"server_key={b64(credential.server_key).decode()},iterations={credential.iterations}"
    )


def credential_from_string(text: str) -> ScramCredential:
    """The inverse of ``credential_to_string``; exactly the four keys, else ValueError
    "Credentials not valid: <text>" as Kafka."""
    props: dict[str, str] = {}
    for token in text.split(","):
        index = token.find("=")
        if index <= 0:
            raise ValueError(f"Credentials not valid: {text}")
        props[token[:index]] = token[index + 1 :]
    if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ValueError(f"Credentials not valid: {text}")
    try:
        return ScramCredential(
            salt=base64.b64decode(props["salt"], validate=True),
            stored_key=base64.b64decode(props["stored_key"], validate=True),
            server_key=base64.b64decode(props["server_key"], validate=True),
            iterations=int(props["iterations"]),
        )
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"Credentials not valid: {text}") from e


def user_config_to_credentials(config: Mapping[str, str]) -> dict[ScramMechanism, ScramCredential]:
    """The SCRAM credentials in a user's entity config (the ``config`` map of the JSON in
    ZooKeeper's ``/config/users/<user>``, keys ``SCRAM-SHA-256`` / ``SCRAM-SHA-512``); other
    keys (quotas) are ignored."""
    out: dict[ScramMechanism, ScramCredential] = {}
    for key, value in config.items():
        mechanism = ScramMechanism.from_name(key)
        if mechanism is not None:
            out[mechanism] = credential_from_string(value)
    return out


def credentials_to_user_config(
    credentials: Mapping[ScramMechanism, ScramCredential],
) -> dict[str, str]:
    """The entity config entries for ``credentials`` (merge them into the user's config)."""
    return {m.mechanism_name: credential_to_string(c) for m, c in credentials.items()}


def format_credential_entry(mechanism: ScramMechanism, credential: ScramCredential) -> str:
    """One ``SCRAM-SHA-256=salt=...,iterations=4096`` entry as kafka-configs prints it."""
    return f"{mechanism.mechanism_name}={credential_to_string(credential)}"


def sanitize_user(name: str) -> str:
    """Kafka's Sanitizer.sanitize, the ZooKeeper node name of a user: Java's URLEncoder (UTF-8;
    letters, digits and ``.-_`` kept) with ``*`` as %2A and a space as %20."""
    out = []
    for byte in name.encode("utf-8"):
        ch = chr(byte)
        if ch.isascii() and (ch.isalnum() or ch in ".-_"):
            out.append(ch)
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def desanitize_user(node: str) -> str:
    """Kafka's Sanitizer.desanitize (Java's URLDecoder: ``+`` is a space)."""
    from urllib.parse import unquote_plus

    return unquote_plus(node, encoding="utf-8", errors="strict")


# Messages (ScramMessages): Java's regular expressions, character class by character class.

_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_B64 = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})"
)
_SERVER_FIRST = re.compile(
    rf"(?:m={_VALUE},)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+)"
    rf"{_EXTENSIONS}"
)
_SERVER_FINAL = re.compile(
    rf"(?:e=(?P<error>[\x01-\x2B\x2D-\x3C\x3E-\x7F]+))|(?:v=(?P<signature>{_BASE64})){_EXTENSIONS}"
)


def username_from_saslname(saslname: str) -> str:
    """``=2C`` is a comma and ``=3D`` an equals sign; any other ``=`` is invalid."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ValueError(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


def saslname_from_username(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _extensions(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in text.split(","):
        if item:
            key, _, value = item.partition("=")
            out[key] = value
    return out


@dataclass(frozen=True)
class DelegationToken:
    """What a delegation-token lookup returns for a SCRAM ``tokenauth`` login: the token's
    HMAC as a credential, its owner (the principal) and its expiry."""

    owner: str
    credential: ScramCredential
    expiry_timestamp_ms: int


CredentialLookup = Callable[[str, ScramMechanism], "ScramCredential | None"]
TokenLookup = Callable[[str, ScramMechanism], "DelegationToken | None"]


class ScramServer:
    """The broker side of one SCRAM exchange (Kafka's ScramSaslServer).

    ``step(client_first)`` returns server-first, ``step(client_final)`` returns server-final
    (``v=<ServerSignature>``) and leaves ``complete`` true with ``principal`` set. Any failure
    raises ``AuthenticationError``; like Kafka, an unknown user or a wrong proof gets the generic
    "Authentication failed during authentication due to invalid credentials with SASL mechanism
    SCRAM-SHA-256", and an authorization id other than the user the public "Authentication
    failed: Client requested an authorization id that is different from username".
    ``credentials`` looks a user's credential up (a ``CredentialStore.get``); the ``tokenauth``
    extension (delegation tokens) is refused unless ``tokens`` is given.
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        credentials: CredentialLookup,
        *,
        tokens: TokenLookup | None = None,
        nonce: Callable[[], str] = random_nonce,
    ) -> None:
        self.mechanism = mechanism
        self.mechanism_name = mechanism.mechanism_name
        self._credentials = credentials
        self._tokens = tokens
        self._nonce = nonce
        self._state = "RECEIVE_CLIENT_FIRST_MESSAGE"
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._combined_nonce = ""
        self.principal: str | None = None
        self.extensions: dict[str, str] = {}
        self.token_expiry_ms: int | None = None

    @property
    def complete(self) -> bool:
        return self._state == "COMPLETE"

    @property
    def credential_expiry_ms(self) -> int | None:
        """When a delegation token's credential ends (None for a password login)."""
        return self.token_expiry_ms

    def _fail(self, detail: str, *, public: bool = False) -> AuthenticationError:
        self._state = "FAILED"
        self._credential = None
        return AuthenticationError(detail, mechanism=self.mechanism_name, public=public)

    def step(self, client_bytes: bytes) -> bytes:
        if self._state == "RECEIVE_CLIENT_FIRST_MESSAGE":
            return self._client_first(client_bytes)
        if self._state == "RECEIVE_CLIENT_FINAL_MESSAGE":
            return self._client_final(client_bytes)
        state = self._state
        self._state = "FAILED"
        raise AuthenticationError(
            f"Unexpected challenge in Sasl server state {state}",
            mechanism=self.mechanism_name,
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
        )

    def _client_first(self, data: bytes) -> bytes:
        message = data.decode("utf-8", errors="replace")
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise self._fail(f"Invalid SCRAM client first message format: {message}")
        extensions = _extensions(match["extensions"])
        try:
            username = username_from_saslname(match["saslname"])
        except ValueError:
            raise self._fail("Authentication failed: Credentials could not be obtained") from None
        if extensions.get(TOKEN_AUTH, "").lower() == "true":
            token = self._tokens(username, self.mechanism) if self._tokens else None
            if token is None:
                raise self._fail(f"Token Authentication failed: Invalid tokenId : {username}")
            self.principal = token.owner
            self.token_expiry_ms = token.expiry_timestamp_ms
            credential: ScramCredential | None = token.credential
        else:
            try:
                credential = self._credentials(username, self.mechanism)
            except Exception as e:  # a store failure is not the client's business
                raise self._fail(
                    f"Authentication failed: Credentials could not be obtained: {e}"
                ) from e
            self.principal = username
        if credential is None:
            raise self._fail("Authentication failed: Invalid user credentials")
        authzid = match["authzid"] or ""
        if authzid and authzid != username:
            raise self._fail(
                "Authentication failed: Client requested an authorization id that is different "
                "from username",
                public=True,
            )
        if credential.iterations < self.mechanism.min_iterations:
            raise self._fail(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{self.mechanism.min_iterations} for {self.mechanism_name}"
            )
        self.extensions = {k: v for k, v in extensions.items() if k == TOKEN_AUTH}
        self._credential = credential
        self._client_first_bare = match["bare"]
        self._combined_nonce = match["nonce"] + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._combined_nonce},s={salt},i={credential.iterations}"
        self._state = "RECEIVE_CLIENT_FINAL_MESSAGE"
        return self._server_first.encode()

    def _client_final(self, data: bytes) -> bytes:
        credential = self._credential
        assert credential is not None
        message = data.decode("utf-8", errors="replace")
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise self._fail(f"Invalid SCRAM client final message format: {message}")
        nonce = match["nonce"].encode()
        expected = self._combined_nonce.encode()
        if len(nonce) < len(expected) or not hmac.compare_digest(nonce[-len(expected) :], expected):
            raise self._fail("Invalid client nonce in the final client message.")
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, match["without_proof"])
        ).encode()
        proof = base64.b64decode(match["proof"])
        client_signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise self._fail("Invalid client credentials")
        xored = bytes(a ^ b for a, b in zip(client_signature, proof, strict=True))
        computed = self.mechanism.hash(xored)
        if not hmac.compare_digest(computed, credential.stored_key):
            raise self._fail("Invalid client credentials")
        signature = self.mechanism.hmac(credential.server_key, auth_message)
        self._credential = None
        self._state = "COMPLETE"
        return b"v=" + base64.b64encode(signature)


class ScramClient:
    """The client side (RFC 5802) for tests and inter-broker connections: ``first()`` gives
    client-first, ``final(server_first)`` client-final, ``verify(server_final)`` checks the
    server's signature (raises AuthenticationError on ``e=`` or a wrong signature)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        username: str,
        password: str,
        *,
        authzid: str = "",
        extensions: Mapping[str, str] | None = None,
        nonce: str | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._password = password
        self._nonce = nonce or random_nonce()
        ext = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        authz = f"a={saslname_from_username(authzid)}" if authzid else ""
        self._gs2 = f"n,{authz},"
        self._bare = f"n={saslname_from_username(username)},r={self._nonce}{ext}"
        self._server_signature = b""

    def first(self) -> bytes:
        return (self._gs2 + self._bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", errors="replace")
        match = _SERVER_FIRST.fullmatch(text)
        if match is None:
            raise AuthenticationError(f"Invalid SCRAM server first message format: {text}")
        if not match["nonce"].startswith(self._nonce) or match["nonce"] == self._nonce:
            raise AuthenticationError("Invalid server nonce: does not start with client nonce")
        iterations = int(match["iterations"])
        if iterations < self.mechanism.min_iterations:
            raise AuthenticationError(
                f"Requested iterations {iterations} is less than the minimum "
                f"{self.mechanism.min_iterations} for {self.mechanism.mechanism_name}"
            )
        m = self.mechanism
        salted = m.salted_password(self._password, base64.b64decode(match["salt"]), iterations)
        channel = base64.b64encode(self._gs2.encode()).decode()
        without_proof = f"c={channel},r={match['nonce']}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = m.client_key(salted)
        signature = m.hmac(m.stored_key(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = m.hmac(m.server_key(salted), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", errors="replace")
        match = _SERVER_FINAL.fullmatch(text)
        if match is None:
            raise AuthenticationError(f"Invalid SCRAM server final message format: {text}")
        if match["error"] is not None:
            raise AuthenticationError(f"Sasl authentication using SCRAM failed: {match['error']}")
        signature = base64.b64decode(match["signature"])
        if not hmac.compare_digest(signature, self._server_signature):
            raise AuthenticationError("Invalid server signature in server final message")
