"""Producing known records for the pipeline tests, with confluent-kafka, outside the code under test."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import Producer


def produce(bootstrap: str, topic: str, records: Iterable[dict[str, Any]], **config: Any) -> int:
    """Produces each record (keyword arguments of ``Producer.produce``) in order and waits for all;
    raises on any delivery failure. Returns how many were written."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **config}
    )
    failures: list[Any] = []
    count = 0
    for record in records:
        producer.produce(topic, on_delivery=lambda e, _m: e and failures.append(e), **record)
        count += 1
        if count % 10_000 == 0:
            producer.flush()
    assert producer.flush(30) == 0, "records still undelivered after 30 s"
    assert not failures, failures
    return count
