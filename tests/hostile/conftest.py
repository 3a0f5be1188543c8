"""Fixtures of the hostile-client tests: a broker under attack and a bystander (tests/support/bystander.py),
a normal producer and consumer that keep running beside the attacker and report whether it disturbed
them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.bystander import BYSTANDER_TOPIC, Bystander
from tests.support.cluster import Cluster


@pytest.fixture
def bystander(one_broker: Cluster) -> Iterator[Bystander]:
    """A normal producer and consumer on ``one_broker``'s topic ``bystander``, running for the whole
    test; the test calls ``bystander.check(max_pause=...)`` once the attack is over."""
    one_broker.create_topic(BYSTANDER_TOPIC, 1)
    with Bystander(one_broker.bootstrap) as running:
        yield running
