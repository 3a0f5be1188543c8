"""ZooKeeper: the asyncio client, Kafka's znode layout, a launcher for a local server, and the fence
that lets only the controller ZooKeeper names send a broker its LeaderAndIsr, UpdateMetadata and
StopReplica.

The broker and the controller both keep their cluster state here, as Kafka did in its ZooKeeper era.
"""
