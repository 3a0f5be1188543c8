"""A TLS client's principal: ``User:<DN>`` from its certificate, mapped by ``ssl.principal.mapping.rules``.

Kafka's DefaultKafkaPrincipalBuilder takes the peer's ``X500Principal.getName()``, the subject DN in the
RFC 2253 form Java prints (``java_rfc2253``: the last RDN first, keywords only for CN, C, L, ST, O, OU,
STREET, DC and UID, any other attribute as ``<oid>=#<hex of its DER value>``, and Java's escaping, which
also escapes ``=`` and ``#``), and maps it with SslPrincipalMapper's rules (``SslPrincipalMapper``):
``DEFAULT`` (the DN as it is) or ``RULE:<regex>/<replacement>/[L|U]``, the first whose regex matches
the whole DN wins; no rule matching fails the authentication. A client without a certificate (on a
listener with ``ssl.client.auth`` none or requested) is ``User:ANONYMOUS``.
"""

from __future__ import annotations

import re

from cryptography import x509

from server_common.principal import ANONYMOUS, KafkaPrincipal

# Java's AVAKeyword table: the attributes RFC 2253 output names by keyword.
_RFC2253_KEYWORDS = {
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
# DER string types Java prints as text (AVA.isDerString, non-canonical).
_UTF8, _PRINTABLE, _T61, _IA5, _GENERAL, _BMP, _UNIVERSAL = 12, 19, 20, 22, 27, 30, 28
_ESCAPEES = ',=+<>#;"\\'


class NoMatchingRule(ValueError):
    """No ``ssl.principal.mapping.rules`` rule applies to a DN (Kafka fails the authentication)."""


def _der_item(data: bytes, pos: int) -> tuple[int, int, int, int]:
    """(tag, start of content, end of content, end of item) of the DER item at ``pos``."""
    tag = data[pos]
    length = data[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        length = int.from_bytes(data[pos : pos + n], "big")
        pos += n
    return tag, pos, pos + length, pos + length


def _oid(content: bytes) -> str:
    parts: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    first = min(parts[0] // 40, 2)
    return ".".join(str(p) for p in [first, parts[0] - 40 * first, *parts[1:]])


def _escape(text: str) -> str:
    out = []
    for c in text:
        if c in _ESCAPEES:
            out.append("\\" + c)
        elif c == "\0":
            out.append("\\00")
        else:
            out.append(c)
    chars = "".join(out)
    stripped = chars.strip(" \r")
    if not stripped:
        return "".join("\\" + c for c in chars)
    lead = len(chars) - len(chars.lstrip(" \r"))
    trail = len(chars) - len(chars.rstrip(" \r"))
    return (
        "".join("\\" + c for c in chars[:lead])
        + chars[lead : len(chars) - trail]
        + "".join("\\" + c for c in chars[len(chars) - trail :])
    )


def _value_text(tag: int, content: bytes) -> str | None:
    if tag == _BMP:
        return content.decode("utf-16-be", "replace")
    if tag == _UNIVERSAL:
        return None
    if tag in (_UTF8, _PRINTABLE, _T61, _IA5, _GENERAL):
        return content.decode("utf-8", "replace")
    return None


def java_rfc2253(name: x509.Name | bytes) -> str:
    """The DN as Java's ``X500Principal.getName()`` prints it (``name``: a Name or its DER encoding)."""
    der = name.public_bytes() if isinstance(name, x509.Name) else name
    _, pos, end, _ = _der_item(der, 0)
    rdns: list[str] = []
    while pos < end:  # each RDN: a SET of AttributeTypeAndValue SEQUENCEs
        _, set_pos, set_end, pos = _der_item(der, pos)
        avas: list[str] = []
        while set_pos < set_end:
            _, seq_pos, _, set_pos = _der_item(der, set_pos)
            _, oid_start, oid_end, value_pos = _der_item(der, seq_pos)
            oid = _oid(der[oid_start:oid_end])
            value_tag, value_start, value_end, value_stop = _der_item(der, value_pos)
            keyword = _RFC2253_KEYWORDS.get(oid)
            text = _value_text(value_tag, der[value_start:value_end]) if keyword else None
            if keyword is None or text is None:
                avas.append(f"{keyword or oid}=#{der[value_pos:value_stop].hex()}")
            else:
                avas.append(f"{keyword}={_escape(text)}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


# SslPrincipalMapper's grammar, verbatim (Java and Python regexes agree on it).
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)


def _java_replacement(replacement: str, match: re.Match[str]) -> str:
    """Java's Matcher.appendReplacement: ``$n`` a group (more digits while the number stays a group;
    a first digit beyond the groups is literal, as Kafka escapes it), ``${name}``, ``\\x`` a literal x."""
    groups = match.re.groups
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            number = int(replacement[i + 1])
            if number > groups:
                out.append(replacement[i : i + 2])
                i += 2
                continue
            i += 2
            while i < len(replacement) and replacement[i].isdigit():
                bigger = number * 10 + int(replacement[i])
                if bigger > groups:
                    break
                number = bigger
                i += 1
            out.append(match.group(number) or "")
        elif c == "$" and replacement.startswith("${", i) and "}" in replacement[i:]:
            close = replacement.index("}", i)
            out.append(match.group(replacement[i + 2 : close]) or "")
            i = close + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class _Rule:
    def __init__(self, pattern: str | None, replacement: str = "", case: str = "") -> None:
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.replacement = replacement
        self.case = case

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(lambda m: _java_replacement(self.replacement, m), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __repr__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        text = f"RULE:{self.pattern.pattern}/{self.replacement}"
        return f"{text}/{self.case}" if self.case else text


class SslPrincipalMapper:
    """Kafka's SslPrincipalMapper: ``ssl.principal.mapping.rules`` applied to a DN."""

    def __init__(self, rules: str | None = "DEFAULT") -> None:
        text = "DEFAULT" if rules is None else rules
        self.rules: list[_Rule] = []
        for m in _RULE_SPLITTER.finditer(text.strip()):
            rule = m.group(1)
            parsed = _RULE_PARSER.match(rule)
            if parsed is None or parsed.end() != len(rule):
                rest = rule[parsed.end() :] if parsed is not None else rule
                raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rest}`")
            if parsed.group(1) is not None:
                self.rules.append(_Rule(None))
            elif parsed.group(2) is not None:
                try:
                    self.rules.append(_Rule(parsed.group(2), parsed.group(4), parsed.group(6)))
                except re.error as e:
                    raise ValueError(f"Invalid rule: `{rule}`: {e}") from None
            # an empty rule is ignored

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.rules}")

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(repr, self.rules))}])"


def principal_from_certificate(der: bytes | None, mapper: SslPrincipalMapper) -> KafkaPrincipal:
    """``User:<mapped DN>`` of a peer certificate (DER), ``User:ANONYMOUS`` without one. Raises
    NoMatchingRule when no mapping rule applies."""
    if not der:
        return ANONYMOUS
    subject = x509.load_der_x509_certificate(der).subject
    return KafkaPrincipal("User", mapper.name(java_rfc2253(subject)))
