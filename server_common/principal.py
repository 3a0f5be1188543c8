"""KafkaPrincipal: who a connection is, as Kafka names it (``User:alice``).

A connection starts as ``User:ANONYMOUS``; TLS with a client certificate makes it ``User:<DN>`` (mapped
by ``ssl.principal.mapping.rules``), and SASL ``User:<authenticated name>``.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``Type:name`` (Kafka's SecurityUtils.parseKafkaPrincipal); ValueError when there is no type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"{text!r} is not a principal of the form Type:name")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
