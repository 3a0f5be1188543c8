"""Broker CPU per Fetch of 1,000 partitions: full fetches next to incremental ones (KIP-227).

Starts a one-broker LocalCluster (its own ZooKeeper and controller), creates a topic of ``--partitions``
partitions, and drives Fetch v``--version`` over one raw connection, a request at a time, with
``max_wait_ms=0`` (nothing waits in the purgatory): first ``--fetches`` sessionless full fetches
(session epoch -1, every partition named and answered), then ``--fetches`` incremental fetches of one
session (nothing changed: an empty request and an empty response), then the same with ``--changed``
partitions getting a record before each fetch (the broker answers them; the consumer names them in its
next fetch with their new position, as KIP-227 clients do). The broker's CPU time comes from
/proc/<pid>/stat (utime + stime) before and after each phase; the produce requests of the last phase
are counted in, as a real workload would.

    .venv/bin/python bench/fetch_sessions.py [--partitions 1000] [--fetches 1000] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocol import record_batch
from protocol.api import ApiKey
from protocol.messages import FetchRequest, ProduceRequest
from tests.support.raw_client import RawClient
from tools.local_cluster import LocalCluster

TOPIC = "fetch-sessions"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def fetch(topic_id: Any, offsets: dict[int, int], session_id: int, epoch: int, version: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchRequest.FetchTopic(
                topic=TOPIC,
                topic_id=topic_id,
                partitions=[
                    FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                    for p, o in offsets.items()
                ],
            )
        ]
        if offsets
        else [],
        forgotten_topics_data=[],
        rack_id="",
    )


class Driver:
    def __init__(self, bootstrap: str, version: int) -> None:
        self.client = RawClient(bootstrap, timeout=30)
        self.version = version
        self.sent = 0
        self.received = 0

    def request(self, key: int, version: int, body: Any) -> Any:
        from protocol.api import api
        from protocol.frame import decode_response, encode_request

        definition = api(key)
        assert definition is not None
        self.client._correlation_id += 1
        frame = encode_request(definition, version, self.client._correlation_id, "bench", body)
        self.client.send_frame(frame)
        self.sent += len(frame)
        reply = self.client.read_frame()
        self.received += len(reply) + 4
        return decode_response(reply, definition, version)[1]


def produce_one(driver: Driver, partition: int) -> None:
    batch = record_batch.encode_batch(
        [record_batch.Record(0, int(time.time() * 1000), None, b"x" * 100)], base_offset=0
    )
    request = ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC,
                partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)],
            )
        ],
    )
    driver.request(ApiKey.PRODUCE, 9, request)


def measure(pid: int, driver: Driver, fetches: int, step: Any) -> dict[str, float]:
    sent, received = driver.sent, driver.received
    cpu, wall = cpu_seconds(pid), time.perf_counter()
    for i in range(fetches):
        step(i)
    cpu, wall = cpu_seconds(pid) - cpu, time.perf_counter() - wall
    return {
        "broker_cpu_us_per_fetch": cpu / fetches * 1e6,
        "wall_us_per_fetch": wall / fetches * 1e6,
        "request_bytes": (driver.sent - sent) / fetches,
        "response_bytes": (driver.received - received) / fetches,
    }


def run(partitions: int, fetches: int, changed: int, version: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="fetch-sessions-") as directory:
        cluster = LocalCluster(directory, brokers=1)
        try:
            cluster.start()
            cluster.create_topic(TOPIC, partitions, 1, timeout=120)
            broker = cluster.broker(1)
            pid = broker.pid
            assert pid is not None
            driver = Driver(broker.bootstrap, version)
            from protocol.messages import MetadataRequest

            metadata = driver.request(
                ApiKey.METADATA,
                12,
                MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]),
            )
            topic_id = metadata.topics[0].topic_id
            offsets = dict.fromkeys(range(partitions), 0)
            for _ in range(20):  # warm up
                driver.request(ApiKey.FETCH, version, fetch(topic_id, offsets, 0, -1, version))
            results = {}
            results["full"] = measure(
                pid,
                driver,
                fetches,
                lambda _: driver.request(ApiKey.FETCH, version, fetch(topic_id, offsets, 0, -1, version)),
            )
            opened = driver.request(ApiKey.FETCH, version, fetch(topic_id, offsets, 0, 0, version))
            session = {"id": opened.session_id, "epoch": 1}
            assert session["id"] != 0, "the broker created no fetch session"

            def incremental(moved: dict[int, int]) -> Any:
                response = driver.request(
                    ApiKey.FETCH, version, fetch(topic_id, moved, session["id"], session["epoch"], version)
                )
                assert response.error_code == 0, response.error_code
                session["epoch"] += 1
                return response

            results["incremental"] = measure(pid, driver, fetches, lambda _: incremental({}))

            moved: dict[int, int] = {}  # partitions whose position moved: named in the next fetch

            def changed_step(i: int) -> None:
                for k in range(changed):
                    produce_one(driver, (i * changed + k) % partitions)
                response = incremental(dict(moved))
                moved.clear()
                for topic in response.responses:
                    for part in topic.partitions:
                        if len(part.records or b""):
                            moved[part.partition_index] = part.high_watermark  # consumed up to it

            results[f"incremental_{changed}_changed"] = measure(pid, driver, fetches, changed_step)
            driver.client.close()
            return results
        finally:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--fetches", type=int, default=1000)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--version", type=int, default=17)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    reps = [run(args.partitions, args.fetches, args.changed, args.version) for _ in range(args.reps)]
    summary = {
        phase: {
            metric: round(statistics.median(r[phase][metric] for r in reps), 1) for metric in reps[0][phase]
        }
        for phase in reps[0]
    }
    print(
        json.dumps(
            {"partitions": args.partitions, "fetch_version": args.version, "median": summary}, indent=2
        )
    )


if __name__ == "__main__":
    main()
