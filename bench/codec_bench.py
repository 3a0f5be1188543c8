"""Codec microbenchmark: µs per operation for the protocol's hot paths, next to kio's (Python, generated).

    .venv/bin/python bench/codec_bench.py [--repeat N]

- Produce v9 parse (1 topic x 6 partitions of 16 KiB and of 1 MiB): ours returns memoryviews of the
  records, so its cost must not grow with batch size; kio copies them.
- Fetch v12 encode (6 partitions x 64 KiB) and Metadata v12 encode (100 topics x 6 partitions, 3
  brokers), from prebuilt message objects in each library (kio's are obtained by parsing our bytes).
Each figure is the best of N timing runs. Results are also written to bench/results/codec-<date>.txt.
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import platform
import timeit
import uuid
from pathlib import Path

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from protocol.messages import FetchResponse, MetadataResponse, ProduceRequest

RESULTS = Path(__file__).resolve().parent / "results"


def produce_request(batch_size: int) -> bytes:
    records = os.urandom(batch_size)
    partitions = [ProduceRequest.PartitionProduceData(index=i, records=records) for i in range(6)]
    request = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[ProduceRequest.TopicProduceData(name="bench", partition_data=partitions)],
    )
    return request.encode(9)


def fetch_response() -> FetchResponse:
    records = os.urandom(64 * 1024)
    partitions = [
        FetchResponse.PartitionData(
            partition_index=i,
            high_watermark=10_000,
            last_stable_offset=10_000,
            log_start_offset=0,
            records=records,
        )
        for i in range(6)
    ]
    return FetchResponse(
        responses=[FetchResponse.FetchableTopicResponse(topic="bench", partitions=partitions)]
    )


def metadata_response() -> MetadataResponse:
    brokers = [
        MetadataResponse.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=9092 + i) for i in range(3)
    ]
    topics = [
        MetadataResponse.MetadataResponseTopic(
            name=f"topic-{t}",
            topic_id=uuid.uuid4(),
            partitions=[
                MetadataResponse.MetadataResponsePartition(
                    partition_index=p,
                    leader_id=p % 3,
                    leader_epoch=5,
                    replica_nodes=[0, 1, 2],
                    isr_nodes=[0, 1, 2],
                )
                for p in range(6)
            ],
        )
        for t in range(100)
    ]
    return MetadataResponse(brokers=brokers, cluster_id="bench", controller_id=0, topics=topics)


def best_us(fn, repeat: int, number: int) -> float:
    return min(timeit.repeat(fn, repeat=repeat, number=number)) / number * 1e6


def kio_writer_timing(response_cls_key: int, version: int, ours: bytes, repeat: int, number: int) -> float:
    cls = load_response_schema(response_cls_key, version)
    obj, _ = entity_reader(cls)(memoryview(ours), 0)
    write = entity_writer(cls)
    out = io.BytesIO()
    write(out, obj)
    assert out.getvalue() == ours, "kio and Samsa disagree on the bytes"
    return best_us(lambda: write(io.BytesIO(), obj), repeat, number)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows: list[tuple[str, float, float]] = []

    kio_produce = entity_reader(load_request_schema(0, 9))
    for label, size in (("16 KiB", 16 * 1024), ("1 MiB", 1 << 20)):
        frame = produce_request(size)
        ours = best_us(lambda frame=frame: ProduceRequest.decode(frame, 9), args.repeat, 2000)
        theirs = best_us(
            lambda frame=frame: kio_produce(memoryview(frame), 0), args.repeat, 20 if size > 65536 else 500
        )
        rows.append((f"Produce v9 parse, 6 x {label}", ours, theirs))

    fetch = fetch_response()
    ours = best_us(lambda: fetch.encode_parts(12), args.repeat, 2000)
    theirs = kio_writer_timing(1, 12, fetch.encode(12), args.repeat, 200)
    rows.append(("Fetch v12 encode, 6 x 64 KiB", ours, theirs))

    metadata = metadata_response()
    ours = best_us(lambda: metadata.encode_parts(12), args.repeat, 100)
    theirs = kio_writer_timing(3, 12, metadata.encode(12), args.repeat, 10)
    rows.append(("Metadata v12 encode, 100 topics x 6 partitions", ours, theirs))

    lines = [
        f"# codec_bench {datetime.datetime.now().isoformat(timespec='seconds')} "
        f"python {platform.python_version()} load1={os.getloadavg()[0]:.2f}",
        f"{'operation':<50} {'samsa µs':>10} {'kio µs':>10} {'kio/samsa':>10}",
    ]
    for name, ours, theirs in rows:
        lines.append(f"{name:<50} {ours:>10.1f} {theirs:>10.1f} {theirs / ours:>9.1f}x")
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"codec-{datetime.date.today()}.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
