"""Recording TCP proxy for capturing client request frames (capture time only, never used by tests).

Forwards 127.0.0.1:LISTEN to 127.0.0.1:UPSTREAM and appends every request frame, exactly as the client
sent it (int32 size prefix + header + body), to OUT in arrival order, plus one JSON line per request to
OUT.jsonl. Two optional rewrites work around reference-broker (Tansu 0.6.0) bugs without changing what
is recorded:
  --strip-apiversions-tags  drop the tagged fields of ApiVersions v3+ responses, which Debian's kcat
                            (librdkafka 2.0.2) misparses;
  --upgrade-init-producer-id  forward InitProducerId v0/v1 as v4 and translate the reply back: Tansu
                            answers a request without producer_id/epoch (v0-v2) with UNKNOWN_SERVER_ERROR,
                            and aiokafka and kafkajs only speak v0/v1.

Usage: python recorder.py LISTEN UPSTREAM OUT [--strip-apiversions-tags] [--upgrade-init-producer-id]
It runs until killed (SIGTERM).
"""

import argparse
import asyncio
import json
import struct
from dataclasses import dataclass, field
from typing import BinaryIO, TextIO

API_VERSIONS = 18
INIT_PRODUCER_ID = 22


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def skip_tags(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


def strip_apiversions_tags(payload: bytes) -> bytes:
    """ApiVersions v3+ response (header v0: correlation id only) with every tag buffer emptied."""
    out = bytearray(payload[:6])  # correlation id, error code
    count, pos = read_uvarint(payload, 6)
    out += uvarint(count)
    for _ in range(count - 1):
        out += payload[pos : pos + 6]  # api_key, min, max
        pos = skip_tags(payload, pos + 6)
        out += b"\x00"
    out += payload[pos : pos + 4]  # throttle_time_ms
    skip_tags(payload, pos + 4)
    out += b"\x00"
    return bytes(out)


def init_producer_id_v0_as_v4(payload: bytes) -> bytes:
    """InitProducerId v0/v1 request -> v4: header v2, compact string, producer id/epoch -1 (none yet)."""
    (client_id_len,) = struct.unpack_from(">h", payload, 8)
    header_end = 10 + max(client_id_len, 0)
    (txn_id_len,) = struct.unpack_from(">h", payload, header_end)
    pos = header_end + 2
    txn_id = payload[pos : pos + txn_id_len] if txn_id_len >= 0 else None
    pos += max(txn_id_len, 0)
    (txn_timeout,) = struct.unpack_from(">i", payload, pos)
    header = struct.pack(">hh", INIT_PRODUCER_ID, 4) + payload[4:header_end] + b"\x00"
    body = uvarint(0) if txn_id is None else uvarint(len(txn_id) + 1) + txn_id
    return header + body + struct.pack(">iqh", txn_timeout, -1, -1) + b"\x00"


def init_producer_id_v4_reply_as_v0(payload: bytes) -> bytes:
    """v4 reply (header v1: correlation id + tags) -> v0/v1 reply: the same fixed fields, no tags."""
    pos = skip_tags(payload, 4)
    return payload[:4] + payload[pos : pos + 16]  # throttle, error, producer_id, producer_epoch


@dataclass
class Recorder:
    frames: BinaryIO
    log: TextIO
    strip_tags: bool
    upgrade_init_producer_id: bool
    connections: int = 0
    requests: int = 0

    def record(self, conn: int, frame: bytes) -> None:
        api_key, version, corr = struct.unpack_from(">hhi", frame, 4)
        self.frames.write(frame)
        self.frames.flush()
        self.requests += 1
        entry = {"n": self.requests, "conn": conn, "api_key": api_key, "version": version, "corr": corr}
        self.log.write(json.dumps(entry) + "\n")
        self.log.flush()


@dataclass
class Connection:
    ident: int
    # correlation id -> (api_key, version as the client sent it)
    pending: dict[int, tuple[int, int]] = field(default_factory=dict)


async def client_to_broker(
    rec: Recorder, conn: Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while True:
            prefix = await reader.readexactly(4)
            payload = await reader.readexactly(struct.unpack(">i", prefix)[0])
            rec.record(conn.ident, prefix + payload)
            api_key, version, corr = struct.unpack_from(">hhi", payload)
            conn.pending[corr] = (api_key, version)
            if rec.upgrade_init_producer_id and api_key == INIT_PRODUCER_ID and version < 2:
                payload = init_producer_id_v0_as_v4(payload)
                prefix = struct.pack(">i", len(payload))
            writer.write(prefix + payload)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def broker_to_client(
    rec: Recorder, conn: Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while True:
            prefix = await reader.readexactly(4)
            payload = await reader.readexactly(struct.unpack(">i", prefix)[0])
            (corr,) = struct.unpack_from(">i", payload)
            api_key, version = conn.pending.pop(corr, (-1, -1))
            rewritten = payload
            if rec.strip_tags and api_key == API_VERSIONS and version >= 3:
                (error,) = struct.unpack_from(">h", payload, 4)
                if error == 0:
                    rewritten = strip_apiversions_tags(payload)
            elif rec.upgrade_init_producer_id and api_key == INIT_PRODUCER_ID and version < 2:
                rewritten = init_producer_id_v4_reply_as_v0(payload)
            if rewritten is not payload:
                prefix = struct.pack(">i", len(rewritten))
            writer.write(prefix + rewritten)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(listen: int, upstream: int, rec: Recorder) -> None:
    async def handle(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        rec.connections += 1
        conn = Connection(rec.connections)
        try:
            b_reader, b_writer = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            c_writer.close()
            return
        await asyncio.gather(
            client_to_broker(rec, conn, c_reader, b_writer), broker_to_client(rec, conn, b_reader, c_writer)
        )

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("listen", type=int)
    parser.add_argument("upstream", type=int)
    parser.add_argument("out")
    parser.add_argument("--strip-apiversions-tags", action="store_true")
    parser.add_argument("--upgrade-init-producer-id", action="store_true")
    args = parser.parse_args()
    with open(args.out, "ab") as frames, open(args.out + ".jsonl", "a") as log:
        rec = Recorder(frames, log, args.strip_apiversions_tags, args.upgrade_init_producer_id)
        asyncio.run(serve(args.listen, args.upstream, rec))


if __name__ == "__main__":
    main()
