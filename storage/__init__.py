"""The partition log on disk, laid out as Kafka lays it out. Knows nothing of sockets or ZooKeeper."""
