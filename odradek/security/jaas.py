"""Kafka's JAAS configuration, as ``sasl.jaas.config`` values and JAAS files are read.

``parse_jaas_config(text)`` tokenizes as Kafka's JaasConfig does (java.io.StreamTokenizer with
``//`` and ``/* */`` comments, ``"`` and ``'`` quoted strings with Java escapes, words of
letters, digits, ``.``, ``-``, ``_`` and ``$``) and returns the entries:
``<login module class> <required|requisite|sufficient|optional> key=value ... ;``.
An unquoted value that starts with a digit, ``.`` or ``-`` is a number to StreamTokenizer and
refused as Kafka refuses it ("Value not specified for key ...").

A broker reads a listener's mechanism from ``listener.name.<listener>.<mechanism>.sasl.jaas.config``
(both lower case; ``server_jaas_config_key``) and from nothing else: ``sasl.jaas.config`` without
the prefixes is ignored on the server with a warning (``server_jaas_entry`` returns it), and
exactly one login module is allowed (not JndiLoginModule, which Kafka disallows by default).
PLAIN's users are its ``user_<name>="<password>"`` options
(``plain_users``); ``username``/``password`` are the broker's own credentials for inter-broker
connections (``login_credentials``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")
DISALLOWED_LOGIN_MODULES = ("com.sun.security.auth.module.JndiLoginModule",)


class JaasConfigError(ValueError):
    """A malformed JAAS config, with Kafka's message."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str  # lower case: required, requisite, sufficient, optional
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options hold passwords
        return f"JaasEntry({self.login_module!r}, {self.flag!r}, options={sorted(self.options)})"


# StreamTokenizer's token kinds.
_WORD = "word"
_QUOTED = "quoted"
_NUMBER = "number"
_CHAR = "char"


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str


def _is_word_start(ch: str) -> bool:
    return ch.isascii() and ch.isalpha() or ch in "_$" or 160 <= ord(ch) <= 255


def _is_word_part(ch: str) -> bool:
    return _is_word_start(ch) or ch.isascii() and ch.isdigit() or ch in ".-"


_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ord(ch) <= 32:
            i += 1
        elif ch == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # "//" and, '/' being StreamTokenizer's comment character, a lone '/'
                while i < n and text[i] not in "\r\n":
                    i += 1
        elif ch in "\"'":
            i += 1
            buf = []
            while i < n and text[i] != ch and text[i] not in "\r\n":
                c = text[i]
                if c == "\\" and i + 1 < n:
                    i += 1
                    c = text[i]
                    if c in "01234567":
                        limit = 3 if c in "0123" else 2
                        digits = ""
                        while i < n and len(digits) < limit and text[i] in "01234567":
                            digits += text[i]
                            i += 1
                        buf.append(chr(int(digits, 8)))
                        continue
                    c = _ESCAPES.get(c, c)
                buf.append(c)
                i += 1
            if i < n and text[i] == ch:
                i += 1
            out.append(_Token(_QUOTED, "".join(buf)))
        elif ch.isascii() and ch.isdigit() or ch in ".-":
            start = i
            i += 1
            while i < n and (text[i].isascii() and text[i].isdigit() or text[i] == "."):
                i += 1
            out.append(_Token(_NUMBER, text[start:i]))
        elif _is_word_start(ch):
            start = i
            while i < n and _is_word_part(text[i]):
                i += 1
            out.append(_Token(_WORD, text[start:i]))
        else:
            out.append(_Token(_CHAR, ch))
            i += 1
    return out


def _sval(token: _Token | None) -> str | None:
    return token.text if token is not None and token.kind in (_WORD, _QUOTED) else None


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """The login module entries of a ``sasl.jaas.config`` value (JaasConfigError when it is
    malformed or empty, with Kafka's message)."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    pos = 0

    def take() -> _Token | None:
        nonlocal pos
        if pos >= len(tokens):
            return None
        pos += 1
        return tokens[pos - 1]

    while True:
        head = take()
        if head is None:
            break
        module = _sval(head)
        if not module:
            raise JaasConfigError("Login module not specified in JAAS config")
        flag_token = take()
        if flag_token is None:
            raise JaasConfigError("Login module control flag not specified in JAAS config")
        flag = _sval(flag_token)
        if flag is None:
            raise JaasConfigError("Login module control flag is not available in the JAAS config")
        if flag.lower() not in FLAGS:
            raise JaasConfigError(f"Invalid login module control flag '{flag}' in JAAS config")
        options: dict[str, str] = {}
        terminated = False
        while True:
            token = take()
            if token is None:
                break
            if token.kind == _CHAR and token.text == ";":
                terminated = True
                break
            key = _sval(token) or token.text
            equals = take()
            value = take() if equals is not None else None
            if equals is None or equals.kind != _CHAR or equals.text != "=":
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            value_text = _sval(value)
            if value_text is None:
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = value_text
        if not terminated:
            raise JaasConfigError("JAAS config entry not terminated by semi-colon")
        entries.append(JaasEntry(module, flag.lower(), options))
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def parse_jaas_file(text: str) -> dict[str, list[JaasEntry]]:
    """A JAAS file (``java.security.auth.login.config``): ``Name { entries };`` sections, e.g.
    ``KafkaServer`` or ``<listener>.KafkaServer``, by name."""
    sections: dict[str, list[JaasEntry]] = {}
    i = 0
    while True:
        open_brace = _find_outside_quotes(text, "{", i)
        if open_brace < 0:
            if text[i:].strip() and _tokens(text[i:]):
                raise JaasConfigError("JAAS file: expected 'Name { ... };'")
            return sections
        name = text[i:open_brace].strip()
        close = _find_outside_quotes(text, "}", open_brace)
        if not name or close < 0:
            raise JaasConfigError("JAAS file: expected 'Name { ... };'")
        sections[name] = parse_jaas_config(text[open_brace + 1 : close])
        i = close + 1
        rest = text[i:].lstrip()
        if rest.startswith(";"):
            i = len(text) - len(rest) + 1


def _find_outside_quotes(text: str, ch: str, start: int) -> int:
    quote = ""
    i = start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == ch:
            return i
        i += 1
    return -1


def server_jaas_config_key(listener: str, mechanism: str) -> str:
    """``listener.name.<listener>.<mechanism>.sasl.jaas.config``, both lower-cased as Kafka."""
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


@dataclass(frozen=True)
class ServerJaas:
    entry: JaasEntry | None
    warning: str | None = None


def server_jaas_entry(value: Callable[[str], object], listener: str, mechanism: str) -> ServerJaas:
    """The JAAS entry a broker uses for ``mechanism`` on ``listener``: ``value(key)`` is the
    config lookup (None when unset). Exactly one login module is allowed. Without the prefixed
    key the entry is None (then a JAAS file's ``<listener>.KafkaServer`` or ``KafkaServer``
    section applies, see ``parse_jaas_file``), with Kafka's warning when the unprefixed
    ``sasl.jaas.config`` is set."""
    raw = value(server_jaas_config_key(listener, mechanism))
    if raw is None:
        warning = None
        if value("sasl.jaas.config") is not None:
            warning = (
                "Server config sasl.jaas.config should be prefixed with SASL mechanism name, "
                "ignoring config"
            )
        return ServerJaas(None, warning)
    return ServerJaas(_single(parse_jaas_config(str(raw))))


def _single(entries: list[JaasEntry]) -> JaasEntry:
    if len(entries) != 1:
        raise JaasConfigError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    module = entries[0].login_module.strip()
    if module in DISALLOWED_LOGIN_MODULES:
        raise JaasConfigError(
            f"{module} is not allowed. Update System property "
            f"'org.apache.kafka.disallowed.login.modules' to allow {module}"
        )
    return entries[0]


def client_jaas_entry(value: Callable[[str], object]) -> JaasEntry | None:
    """A client's (or the broker's inter-broker client's) ``sasl.jaas.config`` entry."""
    raw = value("sasl.jaas.config")
    if raw is None:
        return None
    return _single(parse_jaas_config(str(raw)))


def plain_users(entries: JaasEntry | list[JaasEntry] | None) -> dict[str, str]:
    """PLAIN's user table: ``user_<name>`` options of PlainLoginModule entries (other modules'
    options are not users, as Kafka's JaasContext.configEntryOption)."""
    if entries is None:
        return {}
    if isinstance(entries, JaasEntry):
        entries = [entries]
    users: dict[str, str] = {}
    for entry in entries:
        if entry.login_module != PLAIN_LOGIN_MODULE:
            continue
        for key, password in entry.options.items():
            if key.startswith("user_"):
                users.setdefault(key[len("user_") :], password)
    return users


def login_credentials(entry: JaasEntry | None) -> tuple[str, str] | None:
    """``username`` and ``password`` options (the broker's own login for PLAIN/SCRAM)."""
    if entry is None:
        return None
    username = entry.options.get("username")
    password = entry.options.get("password")
    if username is None or password is None:
        return None
    return username, password
