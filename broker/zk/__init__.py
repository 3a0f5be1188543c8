"""ZooKeeper: the asyncio client, Kafka's znode layout, and a launcher for a local server.

The broker and the controller both keep their cluster state here, as Kafka did in its ZooKeeper era.
"""
