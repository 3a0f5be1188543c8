"""``Bystander``: a normal producer and consumer that keep running beside a hostile client (the
tests/hostile tests) and report whether it disturbed them."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType

from confluent_kafka import Consumer, KafkaError, Producer

BYSTANDER_TOPIC = "bystander"


@dataclass
class _Seen:
    acked: dict[int, float] = field(default_factory=dict)  # value -> when the ack arrived
    consumed: dict[int, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class Bystander:
    """An acks=all producer sending a numbered value every ``interval`` s and a consumer reading them
    back, each on a thread of its own. ``check`` stops both and asserts that neither saw an error, that
    every acknowledged value was consumed, and that neither went ``max_pause`` s without progress."""

    def __init__(self, bootstrap: str, topic: str = BYSTANDER_TOPIC, interval: float = 0.01) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.interval = interval
        self._seen = _Seen()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._flushed = threading.Event()  # the producer has stopped and has every answer it will get
        self._threads = [
            threading.Thread(target=self._produce, name="bystander-producer", daemon=True),
            threading.Thread(target=self._consume, name="bystander-consumer", daemon=True),
        ]
        self._stopped_at = 0.0

    def __enter__(self) -> Bystander:
        for thread in self._threads:
            thread.start()
        deadline = time.monotonic() + 30
        while not self._seen.consumed:
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the bystander read nothing back in 30 s: {self._seen.errors}")
            time.sleep(0.05)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._stopped_at = time.monotonic()
        for thread in self._threads:
            thread.join(timeout=30)

    def _error(self, text: str) -> None:
        with self._lock:
            self._seen.errors.append(text)

    def _produce(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": True}
        )

        def delivered(err: KafkaError | None, msg: object) -> None:
            if err is not None:
                self._error(f"delivery: {err}")
                return
            with self._lock:
                self._seen.acked[int(msg.value())] = time.monotonic()  # type: ignore[attr-defined]

        n = 0
        while not self._stop.is_set():
            producer.produce(self.topic, str(n).encode(), on_delivery=delivered)
            n += 1
            producer.poll(self.interval)
        if producer.flush(20) != 0:
            self._error("the producer could not flush its last values in 20 s")
        self._flushed.set()

    def _consume(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bystander-{id(self)}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,
            }
        )
        consumer.subscribe([self.topic])
        drained_at = None
        try:
            while True:
                if self._stop.is_set():
                    drained_at = drained_at or time.monotonic()
                    # Acknowledgements still arrive while the producer flushes: wait for all of them.
                    with self._lock:
                        done = (
                            self._flushed.is_set() and self._seen.acked.keys() <= self._seen.consumed.keys()
                        )
                    if done or time.monotonic() - drained_at > 20:
                        return
                msg = consumer.poll(0.05)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self._error(f"consume: {msg.error()}")
                    continue
                with self._lock:
                    self._seen.consumed[int(msg.value())] = time.monotonic()
        finally:
            consumer.close()

    def check(self, max_pause: float) -> float:
        """Stops the bystander; fails the test if the attack disturbed it (see the class). Returns the
        longest pause it saw, in seconds."""
        self.stop()
        seen = self._seen
        assert not seen.errors, f"the bystander saw errors: {seen.errors[:10]}"
        lost = sorted(seen.acked.keys() - seen.consumed.keys())
        assert not lost, f"{len(lost)} acknowledged values were never consumed, e.g. {lost[:10]}"
        pauses = [0.0]
        for what, times in (("acknowledgement", seen.acked), ("consumed value", seen.consumed)):
            # From the first value through (for acknowledgements) the moment the bystander stopped.
            stamps = sorted(t for t in times.values() if t <= self._stopped_at)
            if what == "acknowledgement":
                stamps.append(self._stopped_at)
            longest = max((b - a for a, b in itertools.pairwise(stamps)), default=0.0)
            assert longest <= max_pause, f"the bystander waited {longest:.2f} s for an {what}"
            pauses.append(longest)
        return max(pauses)

    @property
    def acknowledged(self) -> int:
        with self._lock:
            return len(self._seen.acked)
