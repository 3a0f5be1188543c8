"""The controller process: election through ZooKeeper, partition and replica state machines."""
