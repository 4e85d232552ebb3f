"""Principals: ``User:<name>``, and the name of a TLS client from its certificate subject with
Kafka's ``ssl.principal.mapping.rules`` (SslPrincipalMapper).

Rules are a comma-separated list of ``DEFAULT`` (the whole RFC 2253 DN) and
``RULE:<java regex>/<replacement>/[L|U]`` (the first rule whose pattern matches the whole DN
gives the name; ``$1`` back references; ``L``/``U`` lower or upper case). No rule matching is
an error (Kafka refuses the connection). ``dn_from_subject`` builds the DN from Python's
``getpeercert()['subject']`` as Java's ``X500Principal.getName()`` does: RDNs last first,
short attribute names (CN, OU, O, L, ST, C, STREET, DC, UID), an e-mail address as its OID
with the hex of its DER IA5String as Java prints it, and RFC 2253 escaping.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

USER_TYPE = "User"
ANONYMOUS = "User:ANONYMOUS"
DEFAULT_RULES = "DEFAULT"


def user_principal(name: str) -> str:
    return f"{USER_TYPE}:{name}"


# Java's regular expressions of SslPrincipalMapper, unchanged (Python reads them alike).
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)


class NoMatchingRule(ValueError):
    pass


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        parts = _java_replacement(self.replacement, self.pattern.groups)

        def expand(m: re.Match[str]) -> str:
            return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in parts)

        result = self.pattern.sub(expand, dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        suffix = "/L" if self.lower else "/U" if self.upper else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{suffix}"


def _java_replacement(text: str, groups: int) -> list[str | int]:
    """Java's Matcher.replaceAll replacement: ``\\x`` is x, ``$n`` a group (digits taken while
    the number stays a group, as Java; a reference to a group that does not exist is kept as
    text, as SslPrincipalMapper escapes it)."""
    parts: list[str | int] = []
    literal = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            literal.append(text[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            ref = int(text[j])
            j += 1
            while j < len(text) and text[j].isdigit() and ref * 10 + int(text[j]) <= groups:
                ref = ref * 10 + int(text[j])
                j += 1
            if ref > groups:
                literal.append(text[i:j])
            else:
                if literal:
                    parts.append("".join(literal))
                    literal = []
                parts.append(ref)
            i = j
        else:
            literal.append(c)
            i += 1
    if literal:
        parts.append("".join(literal))
    return parts


class SslPrincipalMapper:
    """``SslPrincipalMapper(rules).name(dn)``; ValueError "Invalid rule: ..." for bad rules."""

    def __init__(self, rules: str | None = None) -> None:
        text = DEFAULT_RULES if rules is None else rules
        self.rules: list[_Rule] = []
        for match in _SPLITTER.finditer(text.strip()):
            rule = match.group(1)
            parsed = _PARSER.match(rule)
            if parsed is None:
                raise ValueError(f"Invalid rule: {rule}")
            if parsed.end() != len(rule):
                raise ValueError(
                    f"Invalid rule: `{rule}`, unmatched substring: `{rule[parsed.end() :]}`"
                )
            if parsed.group(1) is not None:
                self.rules.append(_Rule(None))
            elif parsed.group(2) is not None:
                try:
                    pattern = re.compile(parsed.group(2))
                except re.error as e:
                    raise ValueError(f"Invalid rule: {rule}: {e}") from None
                self.rules.append(
                    _Rule(pattern, parsed.group(4), parsed.group(6) == "L", parsed.group(6) == "U")
                )

    def name(self, dn: str) -> str:
        """The principal name for ``dn`` (without ``User:``)."""
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(
            f"No rules apply to {dn}, rules [{', '.join(str(r) for r in self.rules)}]"
        )

    def principal(self, dn: str | None) -> str:
        """``User:<name>``, or ``User:ANONYMOUS`` without a client certificate (as Kafka's
        DefaultKafkaPrincipalBuilder on an SSL listener without client auth)."""
        return ANONYMOUS if dn is None else user_principal(self.name(dn))


_ATTR = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_EMAIL_OID = "1.2.840.113549.1.9.1"


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _der_ia5(value: str) -> str:
    raw = value.encode("ascii", errors="replace")
    n = len(raw)
    length = (
        bytes([n])
        if n < 128
        else bytes([0x80 | ((n.bit_length() + 7) // 8)])
        + n.to_bytes((n.bit_length() + 7) // 8, "big")
    )
    return "#" + (b"\x16" + length + raw).hex()


def dn_from_subject(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """The RFC 2253 DN of ``ssl.SSLSocket.getpeercert()['subject']``."""
    rdns = []
    for rdn in reversed(subject):
        avas = []
        for key, value in rdn:
            if key == "emailAddress":
                avas.append(f"{_EMAIL_OID}={_der_ia5(value)}")
            else:
                avas.append(f"{_ATTR.get(key, key)}={_escape(value)}")
        rdns.append("+".join(avas))
    return ",".join(rdns)
