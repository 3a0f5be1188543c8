"""What the tests use that is not a test.

- cluster.py: real clusters, all started by ``tools.local_cluster.LocalCluster`` (the session's shared
  ZooKeeper with a chroot per cluster, ``Cluster``, ``lone_broker``); admin_cluster.py: the admin-API
  tests' cluster on it.
- raw_client.py: a blocking Kafka-protocol client and request builders; events.py: the JSON events a
  client subprocess prints; bystander.py: a producer and consumer beside a hostile client.
- group_member.py, clients/: the client runners the integration tests start as subprocesses (Python,
  kafkajs, Java, kcat), and clients/setup.sh, which installs the non-Python ones (``make clientdeps``).
- capture/: the tooling that captured tests/protocol/vectors (capture time only; no test runs it).
"""
