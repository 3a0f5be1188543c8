"""The configuration machinery shared by Samsa's server processes: Kafka's ``ConfigDef`` (setting names,
types, defaults and validators), Java-properties parsing, listeners, and ``ServerConfig``, the validated
settings of a broker or a controller read back by their Kafka name: ``config["num.io.threads"]``.

Each set of settings names its own definitions with this one machinery: the broker's in
``broker/config.py``, the controller's in ``controller/config.py``, the topic configs in
``storage/config.py``. An unknown or invalid setting is a ``ConfigError`` naming it; a ``ConfigKey``
refuses a single value with a plain ``ValueError`` giving the reason, which each caller words its own way.

A server process accepts, besides its own definitions, any setting Apache Kafka 3.9's broker knows
(``server_common.kafka_config_names``), so that a ``server.properties`` copied from a Kafka installation
starts: each such setting Samsa does not implement is logged once, by name, and ignored. A name that is
no Kafka setting (a typo) and an invalid value of a setting Samsa defines still stop the server.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, Self

from server_common.kafka_config_names import (
    KAFKA_AUTHORIZER_CONFIG_NAMES,
    KAFKA_BROKER_CONFIG_NAMES,
    KAFKA_DYNAMIC_ONLY_BROKER_CONFIG_NAMES,
)

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A setting is unknown, missing or invalid. The message names the setting."""


class ConfigType(IntEnum):
    """A setting's type; the values are the ids DescribeConfigsResponse (v3+) reports for it."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    PASSWORD = 9


_NO_DEFAULT = object()
_INT_BITS = {ConfigType.SHORT: 15, ConfigType.INT: 31, ConfigType.LONG: 63}

# A validator checks a parsed value and raises ValueError with the reason it is refused.
Validator = Callable[[Any], None]


def at_least(minimum: float) -> Validator:
    def check(value: Any) -> None:
        if value is not None and value < minimum:
            raise ValueError(f"the value must be at least {minimum}")

    return check


def between(low: float, high: float) -> Validator:
    def check(value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise ValueError(f"must be in [{low}, {high}]")

    return check


def one_of(*allowed: str) -> Validator:
    def check(value: Any) -> None:
        for v in value if isinstance(value, list) else [value]:
            if v is not None and v not in allowed:
                raise ValueError(f"expected one of {', '.join(allowed)}")

    return check


def to_config_string(value: object) -> str | None:
    """A parsed value as Kafka prints it (ConfigDef.convertToString)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    validator: Validator | None = None
    doc: str = ""

    def parse(self, raw: Any) -> Any:
        """Kafka's ConfigDef.parseType and the key's validator; a Python value (a default, or one given
        in code) is read as the string Kafka would print for it. A refused value raises ValueError(reason)."""
        text = raw if isinstance(raw, str) else to_config_string(raw)
        value = None if text is None else self._parse_text(text.strip())
        if value is not None and self.type in _INT_BITS:
            bits = _INT_BITS[self.type]
            if not -(2**bits) <= value < 2**bits:
                raise ValueError(f"out of range for a {self.type.name.lower()}")
        if self.validator is not None:
            self.validator(value)
        return value

    def _parse_text(self, text: str) -> Any:
        t = self.type
        if t is ConfigType.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ValueError("must be true or false")
            return text.lower() == "true"
        if t in _INT_BITS:
            try:
                return int(text)
            except ValueError:
                raise ValueError("not an integer") from None
        if t is ConfigType.DOUBLE:
            try:
                return float(text)
            except ValueError:
                raise ValueError("not a number") from None
        if t is ConfigType.LIST:
            return [item.strip() for item in text.split(",") if item.strip()]
        return text


class ConfigDef:
    """A set of known settings with their types, defaults, validators and documentation."""

    def __init__(self) -> None:
        self.keys: dict[str, ConfigKey] = {}

    def define(
        self,
        name: str,
        type: ConfigType,
        default: Any = _NO_DEFAULT,
        validator: Validator | None = None,
        doc: str = "",
    ) -> ConfigDef:
        self.keys[name] = ConfigKey(name, type, default, validator, doc)
        return self

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Every setting's value: the one given, else its default; ConfigError for an unknown setting,
        a missing required one, or a value refused."""
        unknown = sorted(set(props) - set(self.keys))
        if unknown:
            raise ConfigError(
                f"unknown configuration setting{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)} "
                "(not a setting of Samsa nor of Apache Kafka's broker)"
            )
        values: dict[str, Any] = {}
        for name, key in self.keys.items():
            if name in props:
                raw = props[name]
            elif key.default is _NO_DEFAULT:
                raise ConfigError(f"missing required configuration setting {name}")
            else:
                raw = key.default
            try:
                values[name] = key.parse(raw)
            except ValueError as e:
                raise ConfigError(f"{name}={raw!r} is invalid: {e}") from None
        return values

    def default_strings(self) -> dict[str, str]:
        """Every setting's default as Kafka prints it, for those that have one (staticDefaultConfigs)."""
        return {
            name: text
            for name, key in self.keys.items()
            if key.default is not _NO_DEFAULT
            and (text := to_config_string(key.parse(key.default))) is not None
        }

    def type_of(self, name: str) -> ConfigType:
        key = self.keys.get(name)
        return ConfigType.UNKNOWN if key is None else key.type

    def doc_of(self, name: str) -> str | None:
        key = self.keys.get(name)
        return (key.doc or None) if key is not None else None


# Settings Kafka hands on to its plugins by prefix (remote storage managers, config providers, the
# ACL authorizer's ZooKeeper TLS settings).
_PLUGIN_PREFIXES = ("rsm.config.", "rlmm.config.", "config.providers.", "authorizer.zookeeper.")
_KAFKA_NAMES = (
    KAFKA_BROKER_CONFIG_NAMES | KAFKA_AUTHORIZER_CONFIG_NAMES | KAFKA_DYNAMIC_ONLY_BROKER_CONFIG_NAMES
)
_PER_LISTENER = re.compile(r"^listener\.name\.[^.]+\.(.+)$")
_logged_unimplemented: set[str] = set()


def is_kafka_setting(name: str) -> bool:
    """True when Apache Kafka 3.9's broker knows the setting: one of its names, a per-listener
    ``listener.name.<listener>.[<sasl mechanism>.]<setting>``, or a plugin prefix it passes on."""
    if name in _KAFKA_NAMES or name.startswith(_PLUGIN_PREFIXES):
        return True
    m = _PER_LISTENER.match(name)
    if m is None:
        return False
    setting = m.group(1)
    return setting in KAFKA_BROKER_CONFIG_NAMES or setting.partition(".")[2] in KAFKA_BROKER_CONFIG_NAMES


def listener_setting_name(name: str) -> str | None:
    """The setting a per-listener ``listener.name.<listener>.[<mechanism>.]<setting>`` overrides."""
    m = _PER_LISTENER.match(name)
    if m is None:
        return None
    setting = m.group(1)
    return setting if setting in KAFKA_BROKER_CONFIG_NAMES else setting.partition(".")[2] or None


def unimplemented_settings(definition: ConfigDef, props: Iterable[str]) -> list[str]:
    """The settings among ``props`` that Kafka knows and ``definition`` does not (Samsa ignores them).
    A per-listener setting counts as implemented when the setting it overrides is (``for_listener``)."""
    return sorted(
        n
        for n in props
        if n not in definition.keys
        and is_kafka_setting(n)
        and listener_setting_name(n) not in definition.keys
    )


def log_unimplemented(names: Iterable[str]) -> None:
    """Logs each Kafka setting Samsa accepts without implementing it, once per process."""
    for name in names:
        if name not in _logged_unimplemented:
            _logged_unimplemented.add(name)
            log.warning(
                "%s is an Apache Kafka setting this Samsa process does not implement: accepted and ignored",
                name,
            )


_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9a-fA-F:.]+\]|[^:/\s]*):(-?\d+)$")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# The SASL mechanisms Samsa's listeners serve (no GSSAPI, no OAUTHBEARER).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class Endpoint:
    """A listener: its name, the security protocol it maps to, and host:port (host "" binds all)."""

    listener: str
    security_protocol: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


def parse_endpoints(name: str, items: Iterable[str], protocol_map: Mapping[str, str]) -> list[Endpoint]:
    endpoints: list[Endpoint] = []
    for item in items:
        m = _LISTENER.match(item)
        if not m:
            raise ConfigError(f"{name}: {item!r} is not of the form LISTENER_NAME://host:port")
        listener, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if listener not in protocol_map:
            raise ConfigError(f"{name}: listener {listener} has no entry in listener.security.protocol.map")
        if not 0 <= port <= 65535:
            raise ConfigError(f"{name}: port {port} of {listener} is out of range")
        if any(e.listener == listener for e in endpoints):
            raise ConfigError(f"{name}: listener {listener} appears more than once")
        endpoints.append(Endpoint(listener, protocol_map[listener], host, port))
    return endpoints


def read_properties(text: str) -> dict[str, str]:
    """Java .properties: `key=value` or `key: value` lines, `#`/`!` comments, backslash continuations."""
    props: dict[str, str] = {}
    logical = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            logical += stripped[:-1]
            continue
        logical += stripped
        m = re.match(r"^((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", logical)
        key, value = (m.group(1), m.group(2)) if m else (logical, "")
        props[key.replace("\\", "")] = value
        logical = ""
    return props


class ServerConfig:
    """The validated settings of a Samsa server process (a broker or a controller), read by Kafka
    name: ``config["num.io.threads"]``. Subclasses name their ConfigDef; the listeners, their security
    protocols and what is advertised for them are parsed and checked here for both."""

    DEFINITION: ConfigDef

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.originals = dict(props)
        # Kafka settings Samsa does not implement: accepted, logged once by name, ignored.
        self.unimplemented = unimplemented_settings(self.DEFINITION, props)
        log_unimplemented(self.unimplemented)
        keys = self.DEFINITION.keys
        # Per-listener overrides are read by ``for_listener``; the rest are ignored.
        ignored = set(self.unimplemented) | {
            k for k in props if k not in keys and listener_setting_name(k) in keys
        }
        self._values = self.DEFINITION.parse({k: v for k, v in props.items() if k not in ignored})
        for name in ignored - set(self.unimplemented):
            setting = listener_setting_name(name)
            assert setting is not None
            try:
                keys[setting].parse(props[name])
            except ValueError as e:
                raise ConfigError(f"{name}={props[name]!r} is invalid: {e}") from None
        self.protocol_map: dict[str, str] = {}
        for item in self._values["listener.security.protocol.map"]:
            listener, _, protocol = item.partition(":")
            if not protocol:
                raise ConfigError(f"listener.security.protocol.map: {item!r} is not LISTENER:PROTOCOL")
            self.protocol_map[listener.strip().upper()] = protocol.strip().upper()
        self.listeners = parse_endpoints("listeners", self._values["listeners"], self.protocol_map)
        if not self.listeners:
            raise ConfigError("listeners must name at least one listener")
        for endpoint in self.listeners:
            if endpoint.security_protocol not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"listeners: {endpoint.listener} uses {endpoint.security_protocol}, which is no security "
                    f"protocol (one of {', '.join(SECURITY_PROTOCOLS)})"
                )
            self._check_listener_security(endpoint)
        advertised = self._values["advertised.listeners"]
        self.advertised_listeners = (
            parse_endpoints("advertised.listeners", advertised, self.protocol_map)
            if advertised
            else list(self.listeners)
        )
        names = {e.listener for e in self.listeners}
        for endpoint in self.advertised_listeners:
            if endpoint.listener not in names:
                raise ConfigError(f"advertised.listeners: {endpoint.listener} is not one of listeners")

    def _check_listener_security(self, endpoint: Endpoint) -> None:
        """A TLS listener needs a key store; a SASL listener mechanisms Samsa has (the key store itself
        is read when the listener starts: ``network.ssl_context``)."""
        listener, protocol = endpoint.listener, endpoint.security_protocol
        prefix = f"listener.name.{listener.lower()}."
        if protocol in ("SSL", "SASL_SSL") and "ssl.keystore.location" in self.DEFINITION.keys:
            has_store = self.for_listener(listener, "ssl.keystore.location") or (
                self.for_listener(listener, "ssl.keystore.key")
                and self.for_listener(listener, "ssl.keystore.certificate.chain")
            )
            if not has_store:
                raise ConfigError(
                    f"listeners: {listener} uses {protocol}, which needs a key store: set "
                    f"ssl.keystore.location (or {prefix}ssl.keystore.location; or ssl.keystore.key and "
                    "ssl.keystore.certificate.chain with ssl.keystore.type=PEM)"
                )
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL") and "sasl.enabled.mechanisms" in self.DEFINITION.keys:
            mechanisms = self.for_listener(listener, "sasl.enabled.mechanisms")
            unsupported = [m for m in mechanisms if m.upper() not in SASL_MECHANISMS]
            if not mechanisms or unsupported:
                raise ConfigError(
                    f"sasl.enabled.mechanisms={','.join(mechanisms)!r} (listener {listener}, {protocol}): "
                    f"Samsa supports {', '.join(SASL_MECHANISMS)}"
                    + (f", not {', '.join(unsupported)}" if unsupported else "")
                    + f" (set sasl.enabled.mechanisms or {prefix}sasl.enabled.mechanisms)"
                )

    @classmethod
    def load(cls, path: str | Path | None, overrides: Iterable[str] = ()) -> Self:
        """Reads a properties file (optional) and applies ``key=value`` overrides over it."""
        props = read_properties(Path(path).read_text(encoding="utf-8")) if path else {}
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--override {item!r} is not of the form key=value")
            props[key.strip()] = value
        return cls(props)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def for_listener(self, listener: str, name: str, mechanism: str | None = None) -> Any:
        """A setting as one listener sees it: Kafka's ``listener.name.<listener>.[<mechanism>.]<name>``
        (listener and mechanism lower-cased) over the plain ``<name>``, parsed with ``<name>``'s type."""
        prefix = f"listener.name.{listener.lower()}."
        names = [f"{prefix}{mechanism.lower()}.{name}"] if mechanism else []
        for key in [*names, prefix + name]:
            if key in self.originals:
                try:
                    return self.DEFINITION.keys[name].parse(self.originals[key])
                except ValueError as e:
                    raise ConfigError(f"{key}={self.originals[key]!r} is invalid: {e}") from None
        return self._values[name]

    def advertised_endpoint(self, listener: str, bound_port: int = 0) -> Endpoint:
        """The address told to others for a listener: an empty host becomes this machine's name, and
        port 0 (an ephemeral port) the port actually bound."""
        endpoint = next(e for e in self.advertised_listeners if e.listener == listener)
        return Endpoint(
            endpoint.listener,
            endpoint.security_protocol,
            endpoint.host or socket.getfqdn(),
            endpoint.port or bound_port,
        )
