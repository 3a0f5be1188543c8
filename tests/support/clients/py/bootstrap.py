"""Bootstrap check with one of the Python clients, run as a subprocess by tests/support/clients/runners.py.

Usage: python bootstrap.py CLIENT HOST:PORT TIMEOUT_MS, with CLIENT one of aiokafka, kafka-python,
confluent-kafka. Prints one JSON object on stdout: cluster_id, controller_id, brokers (node_id, host,
port) and topics. A failure is an exception: traceback on stderr, non-zero exit.
"""

import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

import secure

CLIENT_ID = "samsa-test"


def _aiokafka(bootstrap: str, timeout: float) -> dict[str, Any]:
    from aiokafka.admin import AIOKafkaAdminClient

    async def run() -> dict[str, Any]:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=bootstrap,
            client_id=CLIENT_ID,
            request_timeout_ms=int(timeout * 1000),
            **secure.aiokafka(),
        )
        await admin.start()
        try:
            cluster = await admin.describe_cluster()
            topics = await admin.list_topics()
        finally:
            await admin.close()
        return {
            "cluster_id": cluster["cluster_id"],
            "controller_id": cluster["controller_id"],
            "brokers": [
                {"node_id": b["node_id"], "host": b["host"], "port": b["port"]} for b in cluster["brokers"]
            ],
            "topics": list(topics),
        }

    return asyncio.run(asyncio.wait_for(run(), timeout))


def _kafka_python(bootstrap: str, timeout: float) -> dict[str, Any]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id=CLIENT_ID,
        request_timeout_ms=int(timeout * 1000),
        bootstrap_timeout_ms=int(timeout * 1000),
        **secure.kafka_python(),
    )
    try:
        cluster = admin.describe_cluster()
        topics = admin.list_topics()
    finally:
        admin.close()
    # kafka-python names the id "broker_id" when it read DescribeCluster and "node_id" from Metadata.
    return {
        "cluster_id": cluster["cluster_id"],
        "controller_id": cluster["controller_id"],
        "brokers": [
            {"node_id": b.get("broker_id", b.get("node_id")), "host": b["host"], "port": b["port"]}
            for b in cluster["brokers"]
        ],
        "topics": list(topics),
    }


def _confluent_kafka(bootstrap: str, timeout: float) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID, **secure.librdkafka()})
    md = admin.list_topics(timeout=timeout)
    return {
        "cluster_id": md.cluster_id,
        "controller_id": md.controller_id if md.controller_id >= 0 else None,
        "brokers": [{"node_id": b.id, "host": b.host, "port": b.port} for b in md.brokers.values()],
        "topics": list(md.topics),
    }


CLIENTS: dict[str, Callable[[str, float], dict[str, Any]]] = {
    "aiokafka": _aiokafka,
    "kafka-python": _kafka_python,
    "confluent-kafka": _confluent_kafka,
}


def main() -> None:
    client, bootstrap, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]) / 1000
    print(json.dumps(CLIENTS[client](bootstrap, timeout)))


if __name__ == "__main__":
    main()
