"""ZooKeeper: the asyncio client, Kafka's znode layout and JSON schemas (the reassignment JSON among
them), and a launcher for a local server. It stores and reads; what to make of the data is decided by
its users (the broker's ``ControllerFence``, the controller).

The broker and the controller both keep their cluster state here, as Kafka did in its ZooKeeper era.
"""
