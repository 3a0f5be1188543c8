"""A blocking Kafka-protocol client over one socket (``RawClient``), for tests that need exact bytes on
the wire, and builders of the requests those tests send most."""

from __future__ import annotations

import socket
from typing import Any


class RawClient:
    """A blocking Kafka-protocol client over one socket, for tests that need exact bytes on the wire."""

    def __init__(self, bootstrap: str, timeout: float = 5.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout)
        self.sock.settimeout(timeout)
        self._correlation_id = 0

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def send(self, api_key: int, version: int, body: object, correlation_id: int | None = None) -> int:
        from protocol.api import api
        from protocol.frame import encode_request

        if correlation_id is None:
            self._correlation_id += 1
            correlation_id = self._correlation_id
        self.sock.sendall(encode_request(api(api_key), version, correlation_id, "raw-test", body))
        return correlation_id

    def read_frame(self) -> bytes:
        from protocol import framing

        try:
            return bytes(framing.read_frame(self.sock.recv_into))
        except ConnectionError:
            raise ConnectionError("the broker closed the connection") from None

    def receive(self, api_key: int, version: int) -> tuple[int, object]:
        from protocol.api import api
        from protocol.frame import decode_response

        return decode_response(self.read_frame(), api(api_key), version)

    def request(self, api_key: int, version: int, body: object) -> object:
        correlation_id = self.send(api_key, version, body)
        received_id, response = self.receive(api_key, version)
        assert received_id == correlation_id
        return response

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def fetch_request(
    topic: str,
    partition: int = 0,
    offset: int = 0,
    *,
    max_bytes: int = 1 << 20,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    replica_id: int = -1,
    **partition_fields: Any,
) -> Any:
    """A Fetch of one partition, as a consumer sends it (``max_bytes`` for the response and the
    partition alike); ``partition_fields`` sets the rest of the partition's fields."""
    from protocol.messages import FetchRequest

    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=partition,
                        fetch_offset=offset,
                        partition_max_bytes=max_bytes,
                        **partition_fields,
                    )
                ],
            )
        ],
    )


def produce_request(
    topic: str, records: bytes, partition: int = 0, *, acks: int = -1, timeout_ms: int = 5000
) -> Any:
    """A Produce of ``records`` (encoded batches) to one partition."""
    from protocol.messages import ProduceRequest

    return ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )
