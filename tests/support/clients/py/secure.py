"""The security settings of the Python client scripts beside this file, in each client's own terms.

tests/support/clients/runners.py hands a script its settings as JSON in $SAMSA_CLIENT_SECURITY (the
fields of runners.Security: protocol, ca, certificate, key, key_password, mechanism, username, password,
verify_hostname); unset means PLAINTEXT and every function here returns nothing to add.

- kafka-python: security_protocol, ssl_cafile / ssl_certfile / ssl_keyfile / ssl_password,
  ssl_check_hostname, sasl_mechanism, sasl_plain_username / sasl_plain_password (for SCRAM too);
- aiokafka: security_protocol, ssl_context (aiokafka.helpers.create_ssl_context), sasl_mechanism,
  sasl_plain_username / sasl_plain_password (for SCRAM too);
- confluent-kafka: librdkafka's security.protocol, ssl.ca.location, ssl.certificate.location,
  ssl.key.location, ssl.key.password, ssl.endpoint.identification.algorithm, sasl.mechanisms,
  sasl.username, sasl.password.
"""

from __future__ import annotations

import json
import os
from typing import Any

SECURITY_ENV = "SAMSA_CLIENT_SECURITY"


def settings() -> dict[str, Any] | None:
    """The settings handed in, None for a plaintext client."""
    text = os.environ.get(SECURITY_ENV)
    if not text:
        return None
    found: dict[str, Any] = json.loads(text)
    return None if found.get("protocol", "PLAINTEXT") == "PLAINTEXT" else found


def _tls(s: dict[str, Any]) -> bool:
    return s["protocol"] in ("SSL", "SASL_SSL")


def _sasl(s: dict[str, Any]) -> bool:
    return s["protocol"] in ("SASL_PLAINTEXT", "SASL_SSL")


def _python_kwargs(s: dict[str, Any]) -> dict[str, Any]:
    """What kafka-python and aiokafka take alike: the protocol and SASL's keyword arguments (their
    ``sasl_plain_*`` serve SCRAM too)."""
    kwargs: dict[str, Any] = {"security_protocol": s["protocol"]}
    if _sasl(s):
        kwargs.update(
            sasl_mechanism=s["mechanism"],
            sasl_plain_username=s.get("username"),
            sasl_plain_password=s.get("password"),
        )
    return kwargs


def kafka_python() -> dict[str, Any]:
    """Keyword arguments for kafka-python's KafkaProducer / KafkaConsumer / KafkaAdminClient."""
    s = settings()
    if s is None:
        return {}
    kwargs = _python_kwargs(s)
    if _tls(s):
        kwargs.update(
            ssl_cafile=s.get("ca"),
            ssl_certfile=s.get("certificate"),
            ssl_keyfile=s.get("key"),
            ssl_password=s.get("key_password"),
            ssl_check_hostname=s.get("verify_hostname", True),
        )
    return kwargs


def aiokafka() -> dict[str, Any]:
    """Keyword arguments for aiokafka's AIOKafkaProducer / AIOKafkaConsumer / AIOKafkaAdminClient."""
    s = settings()
    if s is None:
        return {}
    kwargs = _python_kwargs(s)
    if _tls(s):
        from aiokafka.helpers import create_ssl_context

        context = create_ssl_context(
            cafile=s.get("ca"),
            certfile=s.get("certificate"),
            keyfile=s.get("key"),
            password=s.get("key_password"),
        )
        context.check_hostname = bool(s.get("verify_hostname", True))
        kwargs["ssl_context"] = context
    return kwargs


def librdkafka() -> dict[str, Any]:
    """Settings for confluent-kafka's Producer / Consumer / AdminClient (librdkafka's names)."""
    s = settings()
    if s is None:
        return {}
    conf: dict[str, Any] = {"security.protocol": s["protocol"].lower()}
    if _tls(s):
        for key, name in (
            ("ca", "ssl.ca.location"),
            ("certificate", "ssl.certificate.location"),
            ("key", "ssl.key.location"),
            ("key_password", "ssl.key.password"),
        ):
            if s.get(key) is not None:
                conf[name] = s[key]
        conf["ssl.endpoint.identification.algorithm"] = "https" if s.get("verify_hostname", True) else "none"
    if _sasl(s):
        conf.update({"sasl.mechanisms": s["mechanism"], "sasl.username": s.get("username") or ""})
        conf["sasl.password"] = s.get("password") or ""
    return conf
