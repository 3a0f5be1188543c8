"""The broker daemon: network server, request handling, partitions and replication."""
