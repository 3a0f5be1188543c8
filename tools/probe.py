"""Is a Kafka listener answering? One blocking ApiVersions round trip, for ``samsa up``'s readiness wait
and the Docker healthchecks: ``python -m tools.probe HOST:PORT`` exits 0 when it answers, else 1.

ApiVersions v0 is used because every Kafka-protocol listener (broker or controller) answers it before
anything else is negotiated, SASL included; ``--ca CA.pem`` probes a TLS listener (``SSL`` without
client authentication, ``SASL_SSL``), checking its certificate against that CA and HOST.
"""

from __future__ import annotations

import socket
import ssl
import sys

from protocol.api import ApiKey, api
from protocol.frame import decode_response, encode_request
from protocol.framing import read_frame
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse


def answers_api_versions(
    host: str, port: int, timeout: float = 2.0, ssl_context: ssl.SSLContext | None = None
) -> bool:
    """True if ``host:port`` answers ApiVersions without an error code; over TLS with ``ssl_context``
    (checking the server's certificate against ``host``, as the context says)."""
    api_versions = api(ApiKey.API_VERSIONS)
    assert api_versions is not None
    try:
        with socket.create_connection((host, port), timeout) as raw:
            sock = ssl_context.wrap_socket(raw, server_hostname=host) if ssl_context is not None else raw
            with sock:
                sock.settimeout(timeout)
                sock.sendall(encode_request(api_versions, 0, 1, "samsa-probe", ApiVersionsRequest()))
                frame = read_frame(sock.recv_into)
                correlation_id, body = decode_response(frame, api_versions, 0)
    except (OSError, ValueError):
        return False
    return correlation_id == 1 and isinstance(body, ApiVersionsResponse) and body.error_code == 0


def main(argv: list[str]) -> int:
    context = None
    if len(argv) == 3 and argv[0] == "--ca":  # a TLS listener: trust this CA (PEM)
        context = ssl.create_default_context(cafile=argv[1])
        argv = argv[2:]
    if len(argv) != 1 or ":" not in argv[0]:
        print("usage: python -m tools.probe [--ca CA.pem] HOST:PORT", file=sys.stderr)
        return 2
    host, _, port = argv[0].rpartition(":")
    return 0 if answers_api_versions(host.strip("[]"), int(port), ssl_context=context) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
