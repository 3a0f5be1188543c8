"""End-to-end latency at a fixed rate, measured so that the consumer's own batching does not hide it.

run-bench's latency workload (``../shared/bench/kbench.py``) calls ``consume(num_messages=1000,
timeout=0.2)``. librdkafka returns from that call only when 1,000 messages are there or 200 ms have
passed, so at 5,000 msg/s every message waits in the client for up to 200 ms: p50 ≈ 100 ms and
p99 ≈ 200 ms whatever the broker does. This probe keeps everything else of that method — a fresh
6-partition topic; a Python confluent-kafka producer with acks=all and linger.ms=1 sending 1 KiB values
at 5,000 msg/s on a schedule; each value carrying its *intended* send time (so a stalled producer
cannot hide latency: no coordinated omission); a consumer in a separate process with ``assign()``ed
partitions and librdkafka's default fetch settings; the first second discarded; one monotonic clock —
and only lets the consumer take each message the moment librdkafka has it (``poll()``).

    .venv/bin/python bench/e2e_latency.py HOST:PORT [--rate 5000] [--size 1024] [--seconds 15]
"""

from __future__ import annotations

import argparse
import json
import math
import struct
import subprocess
import sys
import time
import uuid
from typing import Any

_STAMP = struct.Struct(">qq")  # sequence number, intended send time (ns, time.monotonic_ns)


def percentile(sorted_values: list[float], p: float) -> float | None:
    """The nearest-rank percentile of an ascending list; None for an empty one."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def summary(latencies_ms: list[float]) -> dict[str, float | None]:
    ordered = sorted(latencies_ms)
    return {
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "p99": percentile(ordered, 99),
        "p999": percentile(ordered, 99.9),
        "max": ordered[-1] if ordered else None,
    }


def consumer_main(bootstrap: str, topic: str, partitions: int, count: int, skip: int, timeout: float) -> None:
    """The consumer process: prints READY once it has fetched, then one RESULT line of JSON."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"e2e-latency-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    consumer.poll(0.5)  # connect and send the first fetches before the producer's clock starts
    print("READY", flush=True)
    latencies: list[float] = []
    seen = 0
    deadline = time.monotonic() + timeout
    clock = time.monotonic_ns
    while seen < count and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is None:
            continue
        now = clock()
        value = message.value()
        if message.error() or value is None or len(value) < _STAMP.size:
            continue
        sequence, due = _STAMP.unpack_from(value)
        seen += 1
        if sequence >= skip:
            latencies.append((now - due) / 1e6)
    consumer.close()
    print(
        "RESULT " + json.dumps({"received": seen, "measured": len(latencies), **summary(latencies)}),
        flush=True,
    )


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)  # held until the result is in: a collected client fails its futures
    futures = admin.create_topics(
        [NewTopic(topic, partitions, replication_factor)], operation_timeout=30, request_timeout=30
    )
    futures[topic].result(60)


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = _admin(bootstrap)
    try:
        admin.delete_topics([topic], operation_timeout=30, request_timeout=30)[topic].result(60)
    except Exception as e:  # a topic left behind is not a failed measurement
        print(f"# could not delete {topic}: {e}", flush=True)


def measure(
    bootstrap: str,
    *,
    rate: int = 5000,
    size: int = 1024,
    seconds: float = 15.0,
    partitions: int = 6,
    replication_factor: int = 1,
    acks: str = "all",
    linger_ms: int = 1,
) -> dict[str, Any]:
    """One run: the consumer's latency percentiles (ms), the producer's ack latency, what was sent and
    received. Raises RuntimeError when the consumer did not start or report."""
    from confluent_kafka import Producer

    topic = f"e2e-latency-{uuid.uuid4().hex[:10]}"
    create_topic(bootstrap, topic, partitions, replication_factor)
    total = int(rate * seconds)
    skip = int(rate * min(1.0, seconds / 5))
    consumer = subprocess.Popen(
        [sys.executable, __file__, "--consumer", bootstrap, topic, str(partitions), str(total), str(skip)],
        stdout=subprocess.PIPE,
        text=True,
    )
    acked: list[float] = []
    try:
        assert consumer.stdout is not None
        if not consumer.stdout.readline().startswith("READY"):
            raise RuntimeError("the latency consumer did not start")
        clock = time.monotonic_ns

        def on_delivery(err: object, message: Any) -> None:
            if err is None:
                sequence, due = _STAMP.unpack_from(message.value())
                if sequence >= skip:
                    acked.append((clock() - due) / 1e6)

        producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms, "compression.type": "none"}
        )
        producer.list_topics(topic, timeout=10)  # connected before the schedule starts
        padding = b"p" * (size - _STAMP.size)
        interval = 1e9 / rate
        start = clock() + 50_000_000
        for i in range(total):
            due = start + int(i * interval)
            while (ahead := due - clock()) > 0:
                if ahead > 200_000:
                    time.sleep((ahead - 100_000) / 1e9)
            value = _STAMP.pack(i, due) + padding
            while True:
                try:
                    producer.produce(topic, value, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.001)
            producer.poll(0)
        achieved = total / ((clock() - start) / 1e9)
        producer.flush(60)
        out, _ = consumer.communicate(timeout=seconds + 90)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
        delete_topic(bootstrap, topic)
    line = next((x for x in (out or "").splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError("the latency consumer gave no result")
    result = json.loads(line[len("RESULT ") :])
    ack = summary(acked)
    result.update(sent=total, achieved_rate=achieved, ack_p50=ack["p50"], ack_p99=ack["p99"])
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--consumer"]:
        bootstrap, topic, partitions, count, skip = argv[1:6]
        consumer_main(
            bootstrap, topic, int(partitions), int(count), int(skip), timeout=float(count) / 1000 + 60
        )
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="bench/e2e_latency.py")
    parser.add_argument("bootstrap")
    parser.add_argument("--rate", type=int, default=5000, help="messages per second (default 5000)")
    parser.add_argument("--size", type=int, default=1024, help="value bytes (default 1024)")
    parser.add_argument("--seconds", type=float, default=15.0, help="default 15")
    parser.add_argument("--replication-factor", type=int, default=1)
    args = parser.parse_args(argv)
    result = measure(
        args.bootstrap,
        rate=args.rate,
        size=max(args.size, _STAMP.size),
        seconds=args.seconds,
        replication_factor=args.replication_factor,
    )
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
