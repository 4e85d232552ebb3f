"""Principals: ``User:<name>``, and the name of a TLS client from its certificate subject with
Kafka's ``ssl.principal.mapping.rules`` (SslPrincipalMapper).

Rules are a comma-separated list of ``DEFAULT`` (the whole RFC 2253 DN) and
``RULE:<java regex>/<replacement>/[L|U]`` (the first rule whose pattern matches the whole DN
gives the name; ``$1`` back references; ``L``/``U`` lower or upper case). No rule matching is
an error (Kafka refuses the connection). ``dn_from_subject`` builds the DN from Python's
``getpeercert()['subject']``, and ``dn_from_certificate`` exactly from the DER certificate
(``getpeercert(binary_form=True)``), as Java's ``X500Principal.getName()`` does: RDNs last
first, keywords only for CN, C, L, ST, O, OU, STREET, DC and UID, any other type (an e-mail
address, serialNumber...) as ``<OID>=#<hex of the DER value>``, and Java's escaping.
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


# Java's X500Principal.getName() (RFC 2253): only these attribute types get their keyword;
# every other type is printed as its OID with the value's DER encoding in hex.
_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# The string types Java prints as text (AVA.isDerString, non-canonical): Printable, T61, IA5,
# General, BMP and UTF8 strings.
_STRING_TAGS = {0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C}
_ESCAPEES = ',=+<>#;"\\'


def _escape(value: str) -> str:
    """Java's AVA.toRFC2253String escaping: ``,=+<>#;"\\`` anywhere, NUL as ``\\00``, and every
    leading and trailing space or CR."""
    chars = []
    for c in value:
        if c in _ESCAPEES:
            chars.append("\\" + c)
        elif c == "\0":
            chars.append("\\00")
        else:
            chars.append(c)
    text = "".join(chars)
    lead = len(text) - len(text.lstrip(" \r"))
    trail = len(text) - len(text.rstrip(" \r"))
    if lead == len(text):
        return "".join("\\" + c for c in text)
    body = text[lead : len(text) - trail]
    return (
        "".join("\\" + c for c in text[:lead])
        + body
        + "".join("\\" + c for c in text[len(text) - trail :])
    )


def _der(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at ``pos``."""
    tag = data[pos]
    length = data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[pos : pos + count], "big")
        pos += count
    if pos + length > len(data):
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def _oid(content: bytes) -> str:
    first = content[0]
    parts = [str(min(first // 40, 2)), str(first - 40 * min(first // 40, 2))]
    value = 0
    for byte in content[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(str(value))
            value = 0
    return ".".join(parts)


def dn_from_name_der(name: bytes) -> str:
    """The RFC 2253 DN of a DER X.501 Name, exactly as Java's ``X500Principal.getName()``."""
    tag, start, end = _der(name, 0)
    if tag != 0x30:
        raise ValueError("not a DER Name")
    rdns = []
    pos = start
    while pos < end:
        _, set_start, set_end = _der(name, pos)
        avas = []
        ava_pos = set_start
        while ava_pos < set_end:
            _, seq_start, seq_end = _der(name, ava_pos)
            _, oid_start, oid_end = _der(name, seq_start)
            oid = _oid(name[oid_start:oid_end])
            value_tag, value_start, value_end = _der(name, oid_end)
            keyword = _KEYWORDS.get(oid)
            if keyword is not None and value_tag in _STRING_TAGS:
                text = name[value_start:value_end].decode("utf-8", errors="replace")
                avas.append(f"{keyword}={_escape(text)}")
            else:
                avas.append(f"{keyword or oid}=#{name[oid_end:seq_end].hex()}")
            ava_pos = seq_end
        rdns.append("+".join(avas))
        pos = set_end
    return ",".join(reversed(rdns))


def subject_der(certificate: bytes) -> bytes:
    """The subject Name of a DER certificate (``getpeercert(binary_form=True)``)."""
    _, cert_start, _ = _der(certificate, 0)
    _, tbs_start, tbs_end = _der(certificate, cert_start)
    pos = tbs_start
    fields: list[tuple[int, int]] = []
    while pos < tbs_end and len(fields) < 6:
        tag, start, end = _der(certificate, pos)
        if not (tag == 0xA0 and not fields):  # skip the optional [0] version
            fields.append((pos, end))
        pos = end
    # serialNumber, signature, issuer, validity, subject
    subject_start, subject_end = fields[4]
    return certificate[subject_start:subject_end]


def dn_from_certificate(certificate: bytes) -> str:
    """The peer's subject DN as Kafka sees it: ``dn_from_certificate(ssl_object.getpeercert(
    binary_form=True))``."""
    return dn_from_name_der(subject_der(certificate))


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
# Python's getpeercert() names of other types, with the OID and the DER string tag their value
# usually has (the dict does not keep the tag; prefer dn_from_certificate).
_OTHER = {
    "emailAddress": ("1.2.840.113549.1.9.1", 0x16),
    "serialNumber": ("2.5.4.5", 0x13),
    "title": ("2.5.4.12", 0x0C),
    "surname": ("2.5.4.4", 0x0C),
    "givenName": ("2.5.4.42", 0x0C),
    "initials": ("2.5.4.43", 0x0C),
    "generationQualifier": ("2.5.4.44", 0x0C),
    "dnQualifier": ("2.5.4.46", 0x13),
    "pseudonym": ("2.5.4.65", 0x0C),
    "businessCategory": ("2.5.4.15", 0x0C),
    "postalCode": ("2.5.4.17", 0x0C),
}


def _der_string(tag: int, value: str) -> str:
    raw = value.encode("utf-8")
    n = len(raw)
    if n < 128:
        length = bytes([n])
    else:
        size = (n.bit_length() + 7) // 8
        length = bytes([0x80 | size]) + n.to_bytes(size, "big")
    return "#" + (bytes([tag]) + length + raw).hex()


def dn_from_subject(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """The RFC 2253 DN of ``ssl.SSLSocket.getpeercert()['subject']`` (best effort: the dict
    loses the DER string types Java prints for non-keyword attributes; ``dn_from_certificate``
    is exact)."""
    rdns = []
    for rdn in reversed(subject):
        avas = []
        for key, value in rdn:
            if key in _ATTR:
                avas.append(f"{_ATTR[key]}={_escape(value)}")
            elif key in _OTHER:
                oid, tag = _OTHER[key]
                avas.append(f"{oid}={_der_string(tag, value)}")
            else:
                avas.append(f"{key}={_escape(value)}")
        rdns.append("+".join(avas))
    return ",".join(rdns)
