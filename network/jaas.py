"""JAAS configuration text, as Kafka reads ``sasl.jaas.config`` (its ``JaasConfig``).

The value holds one or more login module entries::

    org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="a-secret";

``<loginModuleClass> <controlFlag> (<optionName>=<optionValue>)*;`` where the flag is one of required,
requisite, sufficient, optional (any case), option values are quoted (``"..."`` or ``'...'``, with Java's
backslash escapes) or bare words, and ``//`` and ``/* */`` comments are skipped, as Java's
``StreamTokenizer`` does for Kafka. A broker reads its listener's entry for a mechanism
(``listener.name.<listener>.<mechanism>.sasl.jaas.config``): the PLAIN server takes its users from the
``user_<name>="<password>"`` options of a ``PlainLoginModule`` entry, and a broker logs in to other
brokers with the ``username``/``password`` options of its own entry.

Errors are ``JaasError`` (a ValueError) with Kafka's messages; they never repeat an option's value,
which may be a password.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# The login module Kafka expects for each SASL mechanism Samsa serves.
LOGIN_MODULES = {
    "PLAIN": PLAIN_LOGIN_MODULE,
    "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
    "SCRAM-SHA-512": SCRAM_LOGIN_MODULE,
}
# JAAS option prefix of a PLAIN user's password on the server (Kafka's PlainServerCallbackHandler).
JAAS_USER_PREFIX = "user_"

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    """A JAAS configuration that does not parse (the message is Kafka's where it has one)."""


@dataclass(frozen=True)
class LoginModuleEntry:
    """One login module of a JAAS configuration (Java's ``AppConfigurationEntry``)."""

    login_module: str
    control_flag: str  # lower case
    options: dict[str, str] = field(default_factory=dict, repr=False)  # values may be passwords


# Characters of a bare word: Java StreamTokenizer's word characters (letters, 128-255) and, as its
# numeric characters continue a word, digits and '.'; Kafka adds '-', '_' and '$'.
_WORD_EXTRA = frozenset("0123456789.-_$")
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}
_WORD, _QUOTED, _NUMBER = "word", "quoted", "number"


def _is_word_start(c: str) -> bool:
    # Java's StreamTokenizer: ASCII letters, 160-255 and every character above 255.
    return (c.isascii() and c.isalpha()) or c >= "\xa0" or c in "-_$"


def _is_word_char(c: str) -> bool:
    return _is_word_start(c) or c in _WORD_EXTRA


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: words, quoted strings, numbers (which Kafka cannot use as values) and
    single characters ('=', ';', anything else)."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c <= " ":
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c == "/":  # StreamTokenizer's comment character: the rest of the line
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif c in "\"'":
            value, i = _quoted(text, i + 1, c)
            out.append((_QUOTED, value))
        elif c.isdigit() or c == ".":
            j = i + 1
            while j < n and (text[j].isdigit() or text[j] == "."):
                j += 1
            out.append((_NUMBER, text[i:j]))
            i = j
        elif _is_word_start(c):
            j = i + 1
            while j < n and _is_word_char(text[j]):
                j += 1
            out.append((_WORD, text[i:j]))
            i = j
        else:
            out.append((c, c))
            i += 1
    return out


def _quoted(text: str, i: int, quote: str) -> tuple[str, int]:
    """A quoted string from just after its opening quote to its closing one (or the end of the line, as
    StreamTokenizer ends an unterminated string); Java's escapes, including octal."""
    chars: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == quote:
            return "".join(chars), i + 1
        if c == "\n":
            return "".join(chars), i + 1
        if c == "\\" and i + 1 < n:
            e = text[i + 1]
            if e in "01234567":
                j = i + 1
                while j < n and j < i + 4 and text[j] in "01234567":
                    j += 1
                chars.append(chr(int(text[i + 1 : j], 8) & 0xFF))
                i = j
                continue
            chars.append(_ESCAPES.get(e, e))
            i += 2
            continue
        chars.append(c)
        i += 1
    return "".join(chars), n


def parse_jaas_config(text: str) -> list[LoginModuleEntry]:
    """The login module entries of a ``sasl.jaas.config`` value; JaasError when it does not parse."""
    tokens = _tokens(text)
    entries: list[LoginModuleEntry] = []
    pos = 0

    def value_of(token: tuple[str, str]) -> str | None:
        kind, value = token
        return value if kind in (_WORD, _QUOTED) else None

    while pos < len(tokens):
        module = value_of(tokens[pos])
        if module is None:
            raise JaasError(
                f"Unexpected {tokens[pos][1]!r} where a login module class was expected in JAAS config"
            )
        pos += 1
        if pos >= len(tokens):
            raise JaasError("Login module control flag not specified in JAAS config")
        flag = value_of(tokens[pos])
        if flag is None or flag.lower() not in CONTROL_FLAGS:
            raise JaasError(f"Invalid login module control flag '{tokens[pos][1]}' in JAAS config")
        pos += 1
        options: dict[str, str] = {}
        while pos < len(tokens) and tokens[pos][0] != ";":
            key = value_of(tokens[pos])
            if key is None:
                raise JaasError(f"Unexpected {tokens[pos][1]!r} in the options of JAAS config")
            if (
                pos + 2 >= len(tokens)
                or tokens[pos + 1][0] != "="
                or (value := value_of(tokens[pos + 2])) is None
            ):
                raise JaasError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = value
            pos += 3
        if pos >= len(tokens):
            raise JaasError("JAAS config entry not terminated by semi-colon")
        pos += 1  # the ';'
        entries.append(LoginModuleEntry(module, flag.lower(), options))
    if not entries:
        raise JaasError("Login module not specified in JAAS config")
    return entries


def parse_single_entry(text: str) -> LoginModuleEntry:
    """The one entry of a ``sasl.jaas.config`` (Kafka's JaasContext requires exactly one there)."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0]


def option(entries: list[LoginModuleEntry], key: str, login_module: str | None = None) -> str | None:
    """Kafka's ``JaasContext.configEntryOption``: the first value of ``key`` among the entries (only
    those of ``login_module`` when given)."""
    for entry in entries:
        if login_module is not None and entry.login_module != login_module:
            continue
        if key in entry.options:
            return entry.options[key]
    return None
